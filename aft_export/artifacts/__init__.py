"""What a file is: ONNX graphs, their metadata and precision, what they are for, info."""
