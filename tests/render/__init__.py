"""Tests of the renderer: PDFs, scripts, text layer, QR, emoji, geometry."""
