"""QR codes for links (segno): the class join link, "Share this view". Plain Python."""

from __future__ import annotations

import segno


def qr_svg(url: str, *, scale: int = 8, border: int = 2, dark: str = "#000000", light: str = "#ffffff") -> str:
    """An SVG document (text) of a QR code for ``url``: black on white, a quiet zone of
    ``border`` modules, ``scale`` pixels per module. Error correction M, so a projected code
    still scans with some glare."""
    import io
    buffer = io.BytesIO()
    segno.make(url, error="m", micro=False).save(buffer, kind="svg", scale=scale, border=border, dark=dark,
                                                 light=light, xmldecl=False, svgns=True, nl=False)
    return buffer.getvalue().decode("utf-8")


def qr_data_uri(url: str, *, scale: int = 8, border: int = 2) -> str:
    """The same QR code as a ``data:image/svg+xml`` URI (for st.image or an <img>)."""
    code = segno.make(url, error="m", micro=False)
    return code.svg_data_uri(scale=scale, border=border, dark="#000000", light="#ffffff")


def qr_png(url: str, *, scale: int = 10, border: int = 2) -> bytes:
    """The QR code as PNG bytes (for a download button)."""
    import io
    buffer = io.BytesIO()
    segno.make(url, error="m", micro=False).save(buffer, kind="png", scale=scale, border=border)
    return buffer.getvalue()
