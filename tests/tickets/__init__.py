"""Tests of the ticket application: order store, durable files, the render process."""
