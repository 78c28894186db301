"""The injected clock every time-dependent test drives by hand."""


class ManualClock:
    """Returns `t` until a test moves it (`advance` or assigning `t`)."""

    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, dt: float) -> None:
        self.t += dt
