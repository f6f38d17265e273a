"""TensorRT and TensorRT-RTX: the libraries, engine builds and manifests, NVIDIA's tools."""
