"""Draw examples/photo.jpg, the image the serving examples send: a small picture of our own
(an aeroplane against the sky), so that no data set's image is copied into the repository.

    python tools/make_example_photo.py
"""

from pathlib import Path

from PIL import Image, ImageDraw, ImageFilter

OUT = Path(__file__).resolve().parents[1] / "examples" / "photo.jpg"


def draw(size: int = 96) -> Image.Image:
    img = Image.new("RGB", (size, size))
    d = ImageDraw.Draw(img)
    for y in range(size):  # sky: deep blue at the top, pale at the horizon
        t = y / size
        d.line([(0, y), (size, y)], fill=(int(70 + 120 * t), int(120 + 100 * t), int(200 + 50 * t)))
    s = size / 96
    grey, dark = (225, 228, 232), (150, 155, 165)
    d.polygon([(14 * s, 50 * s), (78 * s, 44 * s), (88 * s, 48 * s), (78 * s, 53 * s), (14 * s, 54 * s)], fill=grey)
    d.polygon([(40 * s, 48 * s), (56 * s, 48 * s), (36 * s, 74 * s), (28 * s, 74 * s)], fill=dark)  # near wing
    d.polygon([(44 * s, 47 * s), (56 * s, 47 * s), (44 * s, 30 * s), (38 * s, 30 * s)], fill=dark)  # far wing
    d.polygon([(14 * s, 50 * s), (22 * s, 50 * s), (14 * s, 36 * s), (10 * s, 36 * s)], fill=dark)  # tail
    return img.filter(ImageFilter.SMOOTH)


if __name__ == "__main__":
    OUT.parent.mkdir(parents=True, exist_ok=True)
    draw().save(OUT, quality=90)
    print(f"wrote {OUT.relative_to(OUT.parents[1])} ({OUT.stat().st_size} bytes)")
