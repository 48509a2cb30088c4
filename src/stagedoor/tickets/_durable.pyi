import os

NOT_HERE: int

class DirSync:
    native: bool
    directory: bytes
    fsyncs: int
    def __init__(self, directory: str | bytes | os.PathLike[str]) -> None: ...
    def sync_after_rename(self) -> None: ...

def write_linked(dirpath: bytes, name: bytes, data: bytes,
                 sync: DirSync | None = None) -> int | None: ...

SINK_CAPSULE: bytes

class FileSink:
    capsule: object
    def __init__(self, dirpath: bytes, name: bytes, sync: DirSync | None = None) -> None: ...
    def result(self) -> int | None: ...
