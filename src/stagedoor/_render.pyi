"""Types of the native renderer (stagedoor/_render.pyx)."""

from stagedoor.render.order import Order

def render_order(order: Order) -> bytes:
    """PDF bytes, one page per ticket; byte-identical to stagedoor.render.reference.render_order."""

def qr_matrix(data: bytes) -> list[list[bool]]:
    """The QR symbol for `data` as rows of modules (True = dark), like render.qr.encode."""
