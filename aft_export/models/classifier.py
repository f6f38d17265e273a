"""AFT image classifiers: patch embedding, pre-norm AFT blocks with MLP, pooling, head.

Variants are data (:class:`ModelConfig`), not subclasses. As in the paper, AFT-full,
AFT-local and AFT-simple models carry a learned position embedding (and full/local a
``(T, T)`` bias), so they take exactly one input size; AFT-conv models have no
position embedding and accept any input whose sides are multiples of the patch size.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import torch
from torch import Tensor, nn

from aft_export.errors import AFTExportError
from aft_export.layers.aft import AFTConv, AFTFull, AFTLocal, AFTSimple

VARIANTS = ("full", "local", "simple", "conv")


@dataclass(frozen=True)
class ModelConfig:
    """Everything needed to rebuild a classifier; stored in every checkpoint."""

    variant: str
    img_size: int = 32
    patch_size: int = 4
    in_chans: int = 3
    num_classes: int = 10
    dim: int = 128
    depth: int = 4
    mlp_ratio: float = 2.0
    rank: int | None = None  # AFT-full: rank of u v^T, None for a dense (T, T) bias
    window: int | None = None  # AFT-local: window size s
    heads: int = 1  # AFT-conv: number of heads
    kernel_size: int = 3  # AFT-conv: kernel size k
    stem_channels: int = 0  # >0: a small convolutional stem before the patch projection
    drop_path: float = 0.0

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise AFTExportError(f"unknown AFT variant {self.variant!r}; expected one of {VARIANTS}")
        if self.img_size % self.patch_size:
            raise AFTExportError(
                f"img_size {self.img_size} is not a multiple of patch_size {self.patch_size}"
            )
        if self.variant == "local" and not self.window:
            raise AFTExportError("AFT-local needs window >= 1")
        if self.variant == "conv" and self.dim % self.heads:
            raise AFTExportError(f"dim {self.dim} is not divisible by heads {self.heads}")
        if self.stem_channels and self.patch_size < 2:
            raise AFTExportError("a convolutional stem needs patch_size >= 2")

    @property
    def grid(self) -> tuple[int, int]:
        side = self.img_size // self.patch_size
        return (side, side)

    @property
    def num_tokens(self) -> int:
        return self.grid[0] * self.grid[1]

    @property
    def fixed_input_size(self) -> bool:
        """True when the model has a position embedding and takes one size only."""
        return self.variant != "conv"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ModelConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise AFTExportError(f"model config has unknown fields {unknown}")
        return cls(**data)


class PatchEmbed(nn.Module):
    """Image -> token grid. Optionally a small conv stem (3x3, stride 1 then 2) first."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        in_ch, stride = cfg.in_chans, cfg.patch_size
        if cfg.stem_channels:
            c = cfg.stem_channels
            layers += [
                nn.Conv2d(in_ch, c, 3, 1, 1, bias=False), nn.BatchNorm2d(c), nn.GELU(),
                nn.Conv2d(c, 2 * c, 3, 2, 1, bias=False), nn.BatchNorm2d(2 * c), nn.GELU(),
            ]  # fmt: skip
            in_ch, stride = 2 * c, cfg.patch_size // 2
        layers.append(nn.Conv2d(in_ch, cfg.dim, stride, stride))
        self.proj = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:  # (B, C, H, W) -> (B, d, H/p, W/p)
        return self.proj(x)


class DropPath(nn.Module):
    """Stochastic depth on the residual branch (identity in eval mode)."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = torch.rand(x.shape[0], 1, 1, device=x.device) >= self.p
        return x * keep / (1.0 - self.p)


class Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.act(self.fc1(x)))


def make_mixer(cfg: ModelConfig) -> nn.Module:
    if cfg.variant == "full":
        return AFTFull(cfg.dim, cfg.num_tokens, rank=cfg.rank)
    if cfg.variant == "local":
        return AFTLocal(cfg.dim, cfg.num_tokens, cfg.window, grid=cfg.grid)
    if cfg.variant == "simple":
        return AFTSimple(cfg.dim)
    return AFTConv(cfg.dim, cfg.heads, cfg.kernel_size)


class Block(nn.Module):
    """Pre-norm residual block: x + AFT(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, cfg: ModelConfig, drop_path: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.dim)
        self.mixer = make_mixer(cfg)
        self.norm2 = nn.LayerNorm(cfg.dim)
        self.mlp = Mlp(cfg.dim, int(cfg.dim * cfg.mlp_ratio))
        self.drop_path = DropPath(drop_path)

    def forward(self, x: Tensor, grid: tuple[int, int]) -> Tensor:  # x: (B, T, d)
        x = x + self.drop_path(self.mixer(self.norm1(x), grid))
        return x + self.drop_path(self.mlp(self.norm2(x)))


class AFTClassifier(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.patch_embed = PatchEmbed(cfg)
        if cfg.fixed_input_size:
            self.pos_embed = nn.Parameter(torch.randn(1, cfg.num_tokens, cfg.dim) * 0.02)
        else:
            self.pos_embed = None
        rates = [cfg.drop_path * i / max(cfg.depth - 1, 1) for i in range(cfg.depth)]
        self.blocks = nn.ModuleList(Block(cfg, r) for r in rates)
        self.norm = nn.LayerNorm(cfg.dim)
        self.head = nn.Linear(cfg.dim, cfg.num_classes)
        self.apply(_init_weights)

    def upgrade_state_dict(self, state: dict) -> dict:
        """A copy of ``state`` with parameter layouts of earlier releases converted to this
        model's (AFT-local's dense ``(T, T)`` bias to its band); other entries untouched."""
        state = dict(state)
        for name, module in self.named_modules():
            if isinstance(module, AFTLocal):
                module.upgrade_state(state, f"{name}." if name else "")
        return state

    def check_input(self, x: Tensor) -> None:
        """Raise a clear error for inputs the model cannot take."""
        cfg = self.cfg
        if x.dim() != 4 or x.shape[1] != cfg.in_chans:
            raise AFTExportError(
                f"expected input (N, {cfg.in_chans}, H, W), got {tuple(x.shape)}"
            )
        h, w = x.shape[2], x.shape[3]
        if cfg.fixed_input_size and (h, w) != (cfg.img_size, cfg.img_size):
            raise AFTExportError(
                f"AFT-{cfg.variant} has a position embedding for {cfg.img_size}x{cfg.img_size} "
                f"inputs and cannot take {h}x{w}; resize the images to {cfg.img_size}x{cfg.img_size}"
            )
        if h % cfg.patch_size or w % cfg.patch_size:
            raise AFTExportError(
                f"input size {h}x{w} is not a multiple of the patch size {cfg.patch_size}"
            )

    def forward_features(self, x: Tensor) -> Tensor:
        self.check_input(x)
        x = self.patch_embed(x)  # (B, d, H', W')
        grid = (x.shape[2], x.shape[3])
        x = x.flatten(2).transpose(1, 2)  # (B, T, d)
        if self.pos_embed is not None:
            x = x + self.pos_embed
        for block in self.blocks:
            x = block(x, grid)
        return self.norm(x).mean(dim=1)  # (B, d)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.forward_features(x))


def _init_weights(m: nn.Module) -> None:
    if isinstance(m, nn.Linear):
        nn.init.trunc_normal_(m.weight, std=0.02)
        if m.bias is not None:
            nn.init.zeros_(m.bias)
    elif isinstance(m, nn.LayerNorm):
        nn.init.ones_(m.weight)
        nn.init.zeros_(m.bias)
    elif isinstance(m, nn.Conv2d) and m.groups == 1:
        nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        if m.bias is not None:
            nn.init.zeros_(m.bias)


def count_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def leaf_output_bytes(model: nn.Module, x: torch.Tensor) -> tuple[list[int], torch.Tensor]:
    """The bytes of each leaf module's tensor output when ``model`` runs ``x`` (in the order they
    ran; memory estimates are made from them), and the model's output. Runs without gradients."""
    sizes: list[int] = []

    def hook(_module, _inputs, out):
        if isinstance(out, torch.Tensor):
            sizes.append(out.numel() * out.element_size())

    leaves = [m for m in model.modules() if not any(True for _ in m.children())]
    handles = [m.register_forward_hook(hook) for m in leaves]
    try:
        with torch.inference_mode():
            out = model(x)
    finally:
        for h in handles:
            h.remove()
    return sizes, out
