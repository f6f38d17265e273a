from aft_export.layers.aft import AFTConv, AFTFull, AFTLocal, AFTSimple

__all__ = ["AFTConv", "AFTFull", "AFTLocal", "AFTSimple"]
