"""Top-k classes of images from an aft-export model served by Triton (aft-export serve, or a
container running the repository aft-export triton-repo writes): encoded images to NAME_image.

    python -m aft_export.client --model NAME_image photo.jpg other.png [--url localhost:8000]
    python client.py --model NAME_image photo.jpg        (the copy in a triton-repo repository)

Standalone: numpy and tritonclient only (pip install 'tritonclient[http]').
"""

import argparse

import numpy as np
import tritonclient.http as httpclient


def classify(url: str, model: str, paths: list[str]) -> list[list[tuple[str, float]]]:
    """Top-k (label, logit) per image."""
    encoded = np.array([[open(p, "rb").read()] for p in paths], dtype=object)
    inputs = [httpclient.InferInput("image_bytes", list(encoded.shape), "BYTES")]
    inputs[0].set_data_from_numpy(encoded)
    with httpclient.InferenceServerClient(url) as client:
        result = client.infer(model, inputs)
    logits, index, labels = result.as_numpy("logits"), result.as_numpy("topk_index"), result.as_numpy("topk_label")
    return [[(l.decode(), float(z[i])) for i, l in zip(idx, lab)] for z, idx, lab in zip(logits, index, labels)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("images", nargs="+")
    parser.add_argument("--model", required=True, help="NAME_image")
    parser.add_argument("--url", default="localhost:8000")
    args = parser.parse_args()
    for path, top in zip(args.images, classify(args.url, args.model, args.images)):
        print(path + ": " + ", ".join(f"{label} {logit:.3f}" for label, logit in top))


if __name__ == "__main__":
    main()
