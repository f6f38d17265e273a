"""Top-k classes of images from an aft-export model served by Triton (aft-export serve, or a
container running the repository aft-export triton-repo writes): encoded images to NAME_image.

    python -m aft_export.client --model NAME_image photo.jpg other.png [--url localhost:8000] [--wait 60]
    python client.py --model NAME_image photo.jpg        (the copy in a triton-repo repository)

Waits (at most --wait seconds) until the server answers and the model is ready, so it can
follow a server started in the background. Every error is one line, `error: ...`, exit 2.
Standalone: numpy and tritonclient only (pip install 'tritonclient[http]').
"""

import argparse
import sys
import time

import numpy as np

EXIT_BAD_INPUT = 2


class ClientError(Exception):
    """What went wrong, in one line."""


def _import_client():
    try:
        import tritonclient.http as httpclient
        from tritonclient.utils import InferenceServerException
    except ImportError as exc:
        raise ClientError(f"the client needs tritonclient ({exc}); pip install 'tritonclient[http]'") from None
    return httpclient, InferenceServerException


def _why(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def wait_until_ready(client, url: str, model: str, seconds: float) -> None:
    """Until the server answers and ``model`` is ready, at most ``seconds``. A server that is
    ready (every model it has is ready) but not with ``model`` does not have it."""
    deadline = time.monotonic() + seconds
    live = False
    while True:
        try:
            live = client.is_server_live()
            if client.is_model_ready(model):
                return
            if client.is_server_ready():
                raise ClientError(f"the server at {url} has no model {model}; give one it serves (aft-export serve "
                                  f"prints them: NAME_image for encoded images)")  # fmt: skip
        except ClientError:
            raise
        except Exception:  # noqa: BLE001 - not listening yet, or busy starting: ask again until the deadline
            pass
        if time.monotonic() >= deadline:
            if live:
                raise ClientError(f"model {model} at {url} is not ready after {seconds:g} s; check the name, or "
                                  f"wait longer (--wait)")  # fmt: skip
            raise ClientError(f"no server answered at {url} within {seconds:g} s; start one (aft-export serve "
                              f"MODEL.onnx) or give its address (--url)")  # fmt: skip
        time.sleep(0.25)


def read_images(paths: list[str]) -> list[bytes]:
    out = []
    for p in paths:
        try:
            with open(p, "rb") as f:
                out.append(f.read())
        except OSError as exc:
            raise ClientError(f"cannot read {p} ({exc.strerror or exc}); give an image file") from None
    return out


def classify(url: str, model: str, paths: list[str], wait: float = 0.0) -> list[list[tuple[str, float]]]:
    """Top-k (label, logit) per image; waits up to ``wait`` seconds for the model first."""
    httpclient, InferenceServerException = _import_client()
    encoded = np.array([[b] for b in read_images(paths)], dtype=object)
    inputs = [httpclient.InferInput("image_bytes", list(encoded.shape), "BYTES")]
    inputs[0].set_data_from_numpy(encoded)
    try:
        client = httpclient.InferenceServerClient(url)
    except Exception as exc:  # noqa: BLE001 - a malformed address
        raise ClientError(f"cannot use the address {url} ({_why(exc)}); give host:port, e.g. localhost:8000") from None
    with client:
        wait_until_ready(client, url, model, wait)
        try:
            result = client.infer(model, inputs)
        except InferenceServerException as exc:
            raise ClientError(f"the server refused the request: {_why(exc)}") from None
        except Exception as exc:  # noqa: BLE001 - the connection broke
            raise ClientError(f"no answer from {url} ({_why(exc)}); is the server still running?") from None
    logits, index, labels = result.as_numpy("logits"), result.as_numpy("topk_index"), result.as_numpy("topk_label")
    return [[(l.decode(), float(z[i])) for i, l in zip(idx, lab)] for z, idx, lab in zip(logits, index, labels)]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not argparse's usage block
        print(f"error: {message}; see --help", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


def main(argv=None, prog: str | None = None) -> int:
    # the whole docstring: its first sentence spans two lines, and the rest says how to call it
    parser = _Parser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("images", nargs="+", help="image files (JPEG, PNG, ...), one answer line each")
    parser.add_argument("--model", required=True,
                        help="the served model: NAME_image for encoded images (aft-export serve prints them)")
    parser.add_argument("--url", default="localhost:8000", help="the server's HTTP address (default localhost:8000)")
    parser.add_argument("--wait", type=float, default=60.0,
                        help="seconds to wait for the server and the model to be ready (default 60)")
    args = parser.parse_args(argv)
    try:
        if args.wait < 0:
            raise ClientError("--wait must be 0 or more seconds")
        top = classify(args.url, args.model, args.images, args.wait)
    except ClientError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("error: stopped by SIGINT", file=sys.stderr)
        return 130
    for path, classes in zip(args.images, top):
        print(path + ": " + ", ".join(f"{label} {logit:.3f}" for label, logit in classes))
    return 0


if __name__ == "__main__":  # python -m aft_export.serving.client, or python client.py (no module spec)
    sys.exit(main(prog=f"python -m {__spec__.name}" if __spec__ else None))
