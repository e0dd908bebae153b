"""mmsum: train factual multimodal summarizers (CLIP-BART, XE + SCST on factuality rewards)."""

__version__ = "0.1.0"
