"""One voice for numbers, durations and times: the pages, the exports and the CLI all format through here."""

from __future__ import annotations

from datetime import datetime

NOT_AVAILABLE = "n/a"


def fmt_score(value: float | None, decimals: int = 2) -> str:
    """A score or metric in 0-1 (or a 1-5 mean): two decimals (more where a test's figure needs them)."""
    return NOT_AVAILABLE if value is None else f"{value:.{decimals}f}"


def fmt_on_scale(value: float | None, scale: tuple[float, float]) -> str:
    """A mean with its scale where that is not 0-1: 0.83, or 4.20 /5 for a judge's 1-5."""
    return fmt_score(value) + ("" if value is None or scale == (0.0, 1.0) else f" /{scale[1]:g}")


def fmt_pct(share: float | None, decimals: int = 0) -> str:
    """A share in 0-1 as a percentage: 0.834 -> '83%'."""
    return NOT_AVAILABLE if share is None else f"{share * 100:.{decimals}f}%"


def fmt_count(n: int | None) -> str:
    """A count with thousands separators: 12345 -> '12,345'."""
    return NOT_AVAILABLE if n is None else f"{n:,}"


def fmt_cost(cost: float | None) -> str:
    """An estimated cost (at the prices per 1000 tokens): four decimals, as the Runs page lists it."""
    return NOT_AVAILABLE if cost is None else f"{cost:.4f}"


def fmt_ms(ms: float | None) -> str:
    """A latency or duration: '850 ms' under a second, '1.2 s' under a minute, then '2 min 5 s'."""
    if ms is None:
        return NOT_AVAILABLE
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    minutes, seconds = divmod(round(ms / 1000), 60)
    return f"{minutes} min {seconds} s"


TIME_FORMAT = "%Y-%m-%d %H:%M"  # 24-hour everywhere: tables, charts' axes, exports and the CLI
TIME_FORMAT_SECONDS = "%Y-%m-%d %H:%M:%S"
D3_TIME_FORMAT = "%Y-%m-%d %H:%M"  # the same pattern for chart axes (Vega-Lite and plotly read d3 formats)


def fmt_time(moment: datetime | str | None, seconds: bool = False) -> str:
    """A moment in 24-hour time: '2026-12-06 14:05' (with ':07' when `seconds`); ISO strings are parsed first."""
    if moment is None or moment == "":
        return NOT_AVAILABLE
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    return moment.strftime(TIME_FORMAT_SECONDS if seconds else TIME_FORMAT)


def fmt_change(change: float | None, fmt) -> str:
    """A change (B − A) in the format of its figure, signed: fmt_change(-1500, fmt_ms) -> '-1.5 s'; no sign on 0."""
    if change is None:
        return NOT_AVAILABLE
    sign = "+" if change > 0 else "-" if change < 0 else ""
    return sign + fmt(abs(change))
