"""Running and serving: inference on images, NVIDIA Triton (server, models, repositories), the client."""
