"""Tests of one worker process: read, dispatch, ack, ownership."""
