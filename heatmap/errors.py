"""heatmap's error family: every bad input raises HeatmapError, a ValueError, so
callers that caught ValueError before keep working."""


class HeatmapError(ValueError):
    """A heatmap input (file, line, histogram) that cannot be used."""
