"""A walked file's bytes and text: reading without blocking, the private-key check, decoding, redaction.

This module owns every read of a walked file (:func:`read_bytes`: what sits at the path may have changed
since the walk judged it) and the one secret rule for its content (:func:`screen`): a file holding a private
key gives no text, any other is decoded and its token-shaped secrets redacted (:mod:`kenning.walk.redaction`).
"""

from __future__ import annotations

import base64
import binascii
import codecs
import errno
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kenning.walk.redaction import redact

SNIFF_BYTES = 8192


SECRET_CONTENT = "secret file (contains a private key)"
# The armor of a PEM (RFC 7468), OpenSSH, SSH2 or PGP private key, at most a few optional headers (Proc-Type,
# DEK-Info, Version, Comment), a run of base64, and the END line: a parser that only names "BEGIN RSA PRIVATE
# KEY", or a README showing a key's first line and "...", holds no key. A key's first body line is 64 characters
# or more; 40 leaves room. Line breaks may be real, escaped in a string (\n in a service-account JSON) or
# flattened to spaces (an environment variable), and the lines may carry what a host file wraps them in: a
# comment marker (`# `, `// `, `; `, `-- `, `* `, `% `), a Markdown quote (`> `), or the quotes, `+` and commas
# of a key built by string concatenation. Every repetition is possessive and the headers are bounded, so the
# search stays linear on hostile input (an unbounded header group went quadratic on repeated BEGIN lines).
_BREAK_ATOM = rb"[ \t\"'`,+;#>*%|!]|//|--[ \t]|\r?\n|(?:\\r)?\\n"
_BREAK = rb"(?:%s)*+" % _BREAK_ATOM
_ARMOR_HEADER = rb"[A-Za-z][A-Za-z0-9-]*:[^\r\n\\]*+"
_PRIVATE_KEY = re.compile(
    rb"-{4,5} ?BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)? ?-{4,5}"
    + rb"(?:%s%s){0,8}+%s[A-Za-z0-9+/]{40}" % (_BREAK, _ARMOR_HEADER, _BREAK)
    + rb"(?:[A-Za-z0-9+/=]|%s)*+-{4,5} ?END " % _BREAK_ATOM
)
# "-----BEGIN " base64-encoded at each of the three byte alignments: a key stored encoded, as a kubeconfig's
# client-key-data or a Kubernetes Secret's data holds it. Only the characters no neighbouring byte changes.
_B64_BEGIN = (b"LS0tLS1CRUdJTi", b"0tLS0tQkVHSU4g", b"tLS0tLUJFR0lOI")
_B64_RUN = re.compile(rb"(?:[A-Za-z0-9+/]|\r?\n[ \t]*)+")
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def holds_private_key(data: bytes) -> bool:
    """True if the bytes hold a private key block, whatever the file is called (a ``deploy_key``, a key
    inside a ``.crt`` or a service-account JSON), whatever wraps its lines (comments, a quote, a string built
    by concatenation), in a UTF-16 file, or base64-encoded as a whole (a kubeconfig's ``client-key-data``).
    Public keys and certificates are not matched."""
    if data.startswith(_UTF16_BOMS):
        # the armor's ASCII is two bytes a character here: look at it as UTF-8
        data = data.decode("utf-16", "replace").encode("utf-8")
    # One substring scan of every file; the regex runs only on the rare file that names a private key.
    if data.find(b"PRIVATE KEY") >= 0 and _PRIVATE_KEY.search(data) is not None:
        return True
    return any(_encoded_key(data, marker) for marker in _B64_BEGIN if data.find(marker) >= 0)


def _encoded_key(data: bytes, marker: bytes) -> bool:
    at = data.find(marker)
    while at >= 0:
        after = at + 1
        # The value starts at the marker or up to three characters before it (by the alignment); `base64`
        # wraps its output at 76 columns, so line ends may run through it. A key is a few kB: 64 kB is plenty.
        for start in range(max(0, at - 3), at + 1):
            run = _B64_RUN.match(data, start, start + 65536)
            after = max(after, run.end() if run else 0)  # the next search starts past this run: linear
            body = re.sub(rb"\s+", b"", run.group()) if run else b""
            body = body[: len(body) - len(body) % 4]
            try:
                decoded = base64.b64decode(body, validate=True)
            except (binascii.Error, ValueError):
                continue
            if decoded.find(b"PRIVATE KEY") >= 0 and _PRIVATE_KEY.search(decoded) is not None:
                return True
        at = data.find(marker, after)
    return False


@dataclass(frozen=True, slots=True)
class NotText:
    """Why read_text gave no text: "binary", "not text", "empty", a size or an OS error."""

    reason: str


# Control bytes that do not occur in text; \t \n \r \f \b and ESC (ANSI colour in logs) do.
_CONTROL = bytes(b for b in range(32) if b not in b"\t\n\r\f\b\x1b") + b"\x7f"


NOT_REGULAR = "not a regular file now (a FIFO, socket or device took its place since the walk)"
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def _open_regular(path: Path | str, follow: bool) -> int | NotText:
    """A descriptor on the regular file at path, opened without blocking, or NotText saying why not."""
    flags = _READ_FLAGS if follow else _READ_FLAGS | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow and exc.errno == errno.ELOOP:
            return NotText("a symlink now (it was a file when the walk listed it)")
        return NotText(f"cannot read ({exc.strerror or exc})")
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return NotText(NOT_REGULAR)
    except OSError as exc:
        os.close(fd)
        return NotText(f"cannot read ({exc.strerror or exc})")
    return fd


def read_bytes(path: Path | str, *, max_bytes: int | None = None, follow: bool = True) -> bytes | NotText:
    """The file's bytes, or NotText saying why they cannot be had (unreadable, past the size limit, no longer
    a regular file).

    Every read of a walked file comes here: the walk judged the path, but what sits there may have changed
    since. A FIFO put in a file's place would block a plain open() for good (no writer ever comes), so the
    open never blocks, and what was opened is judged by its descriptor before a byte is read. ``follow=False``
    (a walk that does not follow links, which then never yields one) also refuses a link put in its place.
    """
    fd = _open_regular(path, follow)
    if isinstance(fd, NotText):
        return fd
    try:
        if max_bytes is not None and os.fstat(fd).st_size > max_bytes:
            return _too_big(max_bytes)  # judged before a byte is read: a 2 GB file costs nothing to refuse
        with open(fd, "rb", closefd=False) as fh:
            data = fh.read() if max_bytes is None else fh.read(max_bytes + 1)
    except OSError as exc:
        return NotText(f"cannot read ({exc.strerror or exc})")
    finally:
        os.close(fd)
    if max_bytes is not None and len(data) > max_bytes:
        return _too_big(max_bytes)
    return data


def _too_big(max_bytes: int) -> NotText:
    return NotText(f"past the {max_bytes}-byte limit (--max-filesize)")


# Files larger than this are read as a stream of blocks (:func:`screen_blocks`), never whole: the default size
# limits stop far below it, so only a file a user let in with --max-filesize gets here.
STREAM_BYTES = 32 << 20
_BLOCK = 8 << 20
# A private key block, or a base64 run holding one, fits in this many bytes: each block is checked together with
# the end of the one before, so no key is missed where two blocks meet.
_KEY_OVERLAP = 128 << 10
_CP1252_UNDEFINED = re.compile(rb"[\x81\x8d\x8f\x90\x9d]")


STOPPED = "stopped at its deadline before it was read through"


def screen_blocks(
    path: Path | str, *, follow: bool = True, stop: Callable[[], bool] | None = None
) -> TextBlocks | NotText:
    """A large file's text as :func:`screen` gives it, in blocks of whole lines (each ends with "\\n" but
    maybe the last), without holding the file: memory is a block's, whatever the file's size.

    Two passes over the file: the first settles what :func:`screen` settles on the whole (a private key
    anywhere makes it a secret file; binary or not text by the same tests; which decoding), the second yields
    the text decoded, line ends normalised and redacted line by line, exactly as screen's would be split. A
    single line longer than a block is held whole, as any line-based search must. ``stop`` is asked between
    blocks of the first pass (the caller's deadline): once it says yes, the answer is NotText(STOPPED).
    """
    fd = _open_regular(path, follow)
    if isinstance(fd, NotText):
        return fd
    handed = False
    try:
        with open(fd, "rb", closefd=False) as fh:
            head = fh.read(_BLOCK)
            if not head:
                return NotText("empty")
            utf16 = head.startswith(_UTF16_BOMS)
            sniff = head[:SNIFF_BYTES]
            if not utf16 and (
                b"\0" in sniff or len(sniff) - len(sniff.translate(None, _CONTROL)) > 0.3 * len(sniff)
            ):
                return NotText("binary")
            encoding = "utf-16" if utf16 else "utf-8-sig"
            utf8 = codecs.getincrementaldecoder(encoding)()
            cp1252_ok, replaced, chars, tail = True, 0, 0, b""
            block = head
            while block:
                if utf16:
                    try:
                        text = utf8.decode(block)
                    except UnicodeDecodeError:
                        return NotText("not text")
                    seen = text.encode("utf-8", "surrogatepass")
                    replaced += text.count("\ufffd")
                    chars += len(text)
                else:
                    seen = block
                    if encoding == "utf-8-sig":
                        try:
                            utf8.decode(block)
                        except UnicodeDecodeError:
                            encoding = "cp1252"
                    cp1252_ok = cp1252_ok and _CP1252_UNDEFINED.search(block) is None
                    replaced += block.count(b"\xef\xbf\xbd")
                    chars += len(block)
                if holds_private_key(tail + seen):
                    return NotText(SECRET_CONTENT)
                tail = seen[-_KEY_OVERLAP:]
                if stop is not None and stop():
                    return NotText(STOPPED)
                block = fh.read(_BLOCK)
            if not utf16 and encoding == "utf-8-sig":
                try:
                    utf8.decode(b"", final=True)
                except UnicodeDecodeError:
                    encoding = "cp1252"
            if encoding == "cp1252" and not cp1252_ok:
                encoding = "latin-1"
            if encoding in ("cp1252", "latin-1"):
                replaced = 0  # as in decode: those decodings make no U+FFFD
            if replaced > 0.01 * chars:
                return NotText("not text")
        handed = True
        return TextBlocks(fd, encoding)
    except OSError as exc:
        return NotText(f"cannot read ({exc.strerror or exc})")
    finally:
        if not handed:
            os.close(fd)


class TextBlocks:
    """The second pass of :func:`screen_blocks`: iterate for the blocks; ``close`` (also at the end of the
    iteration) lets go of the file, whether or not a block was read."""

    def __init__(self, fd: int, encoding: str) -> None:
        self._fd: int | None = fd
        self._encoding = encoding

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __iter__(self) -> Iterator[str]:
        if self._fd is None:
            return
        try:
            os.lseek(self._fd, 0, os.SEEK_SET)
            decoder = codecs.getincrementaldecoder(self._encoding)()  # the first pass saw it decode
            rest = ""  # a line not yet ended
            while True:
                block = os.read(self._fd, _BLOCK)
                final = not block
                text = decoder.decode(block, final=final)
                if text.endswith("\r") and not final:
                    text, cr = text[:-1], "\r"  # it may be the first half of a CRLF
                else:
                    cr = ""
                text = (rest + text).replace("\r\n", "\n").replace("\r", "\n")
                cut = len(text) if final else text.rfind("\n") + 1
                if cut:
                    yield redact(text[:cut])
                rest = text[cut:] + cr
                if final:
                    return
        finally:
            self.close()


def read_text(path: Path | str, *, max_bytes: int | None = None, follow: bool = True) -> str | NotText:
    """The file's text as kenning may show it (see :func:`screen`), or NotText saying why there is none (read
    as :func:`read_bytes`)."""
    data = read_bytes(path, max_bytes=max_bytes, follow=follow)
    return data if isinstance(data, NotText) else screen(data)


def screen(data: bytes) -> str | NotText:
    """The one secret rule for a file's bytes: every surface that reads a file (index, grep, symbols, and so
    the daemon and MCP, which call them) gets its text here, so none can show what another refuses.

    A file holding a private key gives no text at all (NotText(SECRET_CONTENT)); any other is decoded
    (:func:`decode`) and its token-shaped secrets are replaced (:func:`kenning.walk.redaction.redact`), line
    numbers unchanged.
    """
    if holds_private_key(data):
        return NotText(SECRET_CONTENT)
    text = decode(data)
    if isinstance(text, NotText):
        return text
    return redact(
        text, None if data.startswith(_UTF16_BOMS) else data
    )  # UTF-16 bytes do not hold ASCII hints


def decode(data: bytes) -> str | NotText:
    """Bytes to text with line ends normalised to ``\\n``, or NotText ("empty", "binary", "not text").

    UTF-8 first (BOM stripped), then UTF-16 if it has a BOM, then cp1252, then latin-1, so legacy 8-bit files
    keep their accented letters instead of turning into U+FFFD.
    """
    if not data:
        return NotText("empty")
    if data.startswith(_UTF16_BOMS):  # UTF-16 has NULs, so decode before the sniff
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError:
            return NotText("not text")
    else:
        head = data[:SNIFF_BYTES]
        if b"\0" in head or len(head) - len(head.translate(None, _CONTROL)) > 0.3 * len(head):
            return NotText("binary")
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            try:
                text = data.decode("cp1252")
            except UnicodeDecodeError:
                text = data.decode("latin-1")  # maps every byte, never fails
    if text.count("\ufffd") > 0.01 * len(text):
        return NotText("not text")
    return text.replace("\r\n", "\n").replace("\r", "\n")
