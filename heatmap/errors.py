"""heatmap's error family. Bad values raise ValueError (HeatmapError is one)."""


class HeatmapError(ValueError):
    """A heatmap input (file, line, histogram) that cannot be used."""
