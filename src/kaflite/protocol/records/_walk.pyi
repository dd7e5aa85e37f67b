def walk(
    records: bytes | bytearray | memoryview, count: int, base_timestamp: int, /
) -> tuple[int, bool, bool, int, int]:
    """(end, offsets_sequential, null_key, newest, oldest); ValueError if malformed."""
