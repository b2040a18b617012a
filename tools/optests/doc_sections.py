"""A generated section of a markdown file, between a begin and an end marker: replaced in place, or
appended when the file has none yet; the rest of the file stays as it is."""

from pathlib import Path


def replace_section(path: Path, begin: str, end: str, section: str) -> None:
    """`section` must start with `begin` and end with `end` (and a newline)."""
    text = path.read_text() if path.exists() else ""
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        tail = rest.split(end, 1)[1].lstrip("\n")
        text = head + section + ("\n" + tail if tail else "")
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + section
    path.write_text(text)
