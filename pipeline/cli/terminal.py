"""Terminal output that cannot be steered by the text it shows.

Stored text (questions, answers, model output, document names) may carry ANSI escape sequences or other
control characters that would recolour, move the cursor, clear the screen or retitle the terminal. The CLI's
consoles replace every such character in the text they print with its visible Unicode control picture
(ESC becomes ␛), one character for one, while rich's own styling still reaches the terminal."""

from __future__ import annotations

import re

from rich.console import Console
from rich.segment import Segment

LOG_WIDTH = 100_000  # columns of a console that is not a terminal: wide enough that no table is cut or wrapped
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _picture(match: re.Match) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)
    return "\u2421" if code == 0x7F else "\ufffd"


def visible_controls(text: str) -> str:
    """text with every control character except newline and tab shown as a visible symbol."""
    return CONTROL.sub(_picture, text)


class SafeConsole(Console):
    """A rich Console whose printed text has its control characters made visible; not on a terminal (and given no
    width), wide enough that its tables print whole."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if kwargs.get("width") is None and not self.is_terminal:
            self.width = LOG_WIDTH

    def _render_buffer(self, buffer):
        return super()._render_buffer(
            segment if segment.control else Segment(visible_controls(segment.text), segment.style) for segment in buffer
        )
