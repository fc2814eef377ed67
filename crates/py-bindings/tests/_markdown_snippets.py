"""The Python examples of the repository's Markdown pages, found and run as a reader runs them;
loaded by path by ``test_docs.py``.

A page's ```` ```python ```` blocks run in order in one namespace, so that a block may use what
an earlier block of the same page defined. Each block is compiled under the page's own path with
its lines where they are in the page, so that a traceback names ``docs/lists.md, line 33`` and
shows that line. Three kinds of block are told apart:

- a block whose first line starts with ``>>>`` runs as a doctest: each output shown must be the
  output printed (``...`` matches anything, whitespace is normalised);
- a block followed by a line ``prints`` (or ``which prints``) and a ```` ```text ```` block must
  print exactly that text;
- a block whose info string is ``python no-run <reason>`` is not run; the reason is required.

Any other Python block runs, and anything it prints is kept from the test's output.
"""

import contextlib
import dataclasses
import difflib
import doctest
import io
import os
import re
import traceback
from pathlib import Path
from typing import Callable, Dict, List, Optional

#: An opening fence: its indent (a list item's), three or more backticks or tildes, the info string.
_OPENING = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
#: The paragraph between a block and the text block of its output.
_PRINTS = re.compile(r"^(which |it )?prints:?$", re.IGNORECASE)
#: The info string of a block that must not run: ``python no-run``, then the reason.
_NO_RUN = re.compile(r"^no-run\b[\s:]*(?P<reason>.*)$")
#: The languages whose blocks are Python examples.
_PYTHON = {"python", "python3", "py", "pycon"}
#: Folders never searched for pages: build outputs, environments and hidden folders.
_SKIPPED_FOLDERS = {"target", "node_modules", "venv", "__pycache__"}


class MarkdownError(ValueError):
    """A page that cannot be read as examples: an unclosed fence, a no-run block without reason."""


@dataclasses.dataclass(frozen=True)
class Block:
    """One Python block of a page."""

    page: str  # the page's path relative to the repository root, for messages
    path: Path  # the page's absolute path, under which the block is compiled
    line: int  # the line of the block's first line of code, counted from 1
    code: str
    mode: str  # "run", "doctest" or "no-run"
    reason: str = ""  # why a "no-run" block does not run
    output: Optional[str] = None  # the text it must print, from the text block after it
    output_line: Optional[int] = None  # the line of that text block's first line

    @property
    def where(self) -> str:
        return f"{self.page}, the python block at line {self.line}"


class SnippetFailure(AssertionError):
    """A block that raised or printed other than its page says; the message says where."""


def pages(root: Path) -> List[Path]:
    """Every Markdown page of the repository, sorted, build outputs and hidden folders left out."""
    found = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(
            name for name in subfolders if name not in _SKIPPED_FOLDERS and not name.startswith(".")
        )
        found.extend(Path(folder) / name for name in files if name.endswith(".md"))
    return sorted(found, key=lambda path: path.relative_to(root).as_posix())


def _fences(lines: List[str], page: str):
    """(info string, first line index, lines, index after the closing fence) of each fenced block."""
    index = 0
    while index < len(lines):
        opening = _OPENING.match(lines[index])
        if not opening:
            index += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        closing = re.compile(rf"^ *{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        end = index + 1
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        if end == len(lines):
            raise MarkdownError(f"{page}: the fence at line {index + 1} is never closed")
        body = [line[indent:] if line[:indent].isspace() else line for line in lines[index + 1 : end]]
        yield opening["info"].strip(), index + 1, body, end + 1
        index = end + 1


def parse(path: Path, page: str) -> List[Block]:
    """The Python blocks of the page at ``path`` (named ``page`` in messages), in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    fences = list(_fences(lines, page))
    blocks = []
    for number, (info, first, body, after) in enumerate(fences):
        language, _, rest = info.partition(" ")
        if language.lower() not in _PYTHON:
            continue
        code = "\n".join(body) + "\n"
        where = f"{page}, the python block at line {first + 1}"
        no_run = _NO_RUN.match(rest.strip())
        if no_run:
            if not no_run["reason"]:
                raise MarkdownError(f"{where} is marked no-run without a reason after it")
            blocks.append(Block(page, path, first + 1, code, "no-run", reason=no_run["reason"]))
            continue
        if rest.strip():
            raise MarkdownError(f"{where} has an unknown info string {info!r}")
        mode = "doctest" if code.lstrip().startswith(">>>") else "run"
        output = output_line = None
        following = fences[number + 1] if number + 1 < len(fences) else None
        between = [line.strip() for line in lines[after : following[1] - 1]] if following else []
        paragraph = " ".join(line for line in between if line)
        if following and _PRINTS.match(paragraph):
            if following[0] != "text":
                raise MarkdownError(f"{where} says it prints, but no ```text block follows")
            output, output_line = "\n".join(following[2]), following[1] + 1
        blocks.append(Block(page, path, first + 1, code, mode, output=output, output_line=output_line))
    return blocks


def _compiled(block: Block, code: str):
    # Blank lines in front put every line where it is in the page, for tracebacks.
    return compile("\n" * (block.line - 1) + code, str(block.path), "exec")


def _snippet_traceback(block: Block, error: BaseException) -> str:
    """The traceback from the block's first frame on (the runner's frames left out)."""
    frames = error.__traceback__
    while frames is not None and frames.tb_frame.f_code.co_filename != str(block.path):
        frames = frames.tb_next
    lines = traceback.format_exception(type(error), error, frames or error.__traceback__)
    return "".join(lines).replace(str(block.path), block.page)


def _run_doctest(block: Block, code: str, namespace: Dict) -> None:
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    test = doctest.DocTestParser().get_doctest(code, namespace, block.where, block.page, block.line - 1)
    report = io.StringIO()
    result = doctest.DocTestRunner(optionflags=flags).run(test, out=report.write, clear_globs=False)
    if result.failed:
        raise SnippetFailure(f"{block.where}: {result.failed} of {result.attempted} examples "
                             f"failed\n{report.getvalue()}")


def run_block(block: Block, namespace: Dict, substitutions: Dict[str, str]) -> None:
    """Runs one block in ``namespace``; raises ``SnippetFailure`` saying where and why."""
    code = block.code
    for text, replacement in substitutions.items():
        code = code.replace(text, replacement)
    if block.mode == "doctest":
        _run_doctest(block, code, namespace)
        return
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            exec(_compiled(block, code), namespace)
    except Exception as error:
        raise SnippetFailure(
            f"{block.where}: {type(error).__name__}: {error}\n{_snippet_traceback(block, error)}"
        ) from None
    if block.output is not None:
        got = [line.rstrip() for line in printed.getvalue().rstrip("\n").splitlines()]
        expected = [line.rstrip() for line in block.output.rstrip("\n").splitlines()]
        if got != expected:
            diff = "\n".join(difflib.unified_diff(expected, got, "the page", "printed", lineterm=""))
            raise SnippetFailure(
                f"{block.where} printed other than the text block at line {block.output_line} "
                f"says:\n{diff}"
            )


def run_page(
    blocks: List[Block],
    substitutions: Dict[str, str],
    before: Callable[[Block], None] = lambda block: None,
    after: Callable[[Block], None] = lambda block: None,
    namespace: Optional[Dict] = None,
) -> Dict:
    """Runs a page's blocks in order in one namespace, ``namespace`` when given (no-run blocks
    passed over); ``before`` and ``after`` are called around each block that runs. Returns the
    namespace, in which the blocks run as a script does (``__name__`` is ``"__main__"``)."""
    namespace = {} if namespace is None else namespace
    namespace["__name__"] = "__main__"
    for block in blocks:
        if block.mode == "no-run":
            continue
        before(block)
        run_block(block, namespace, substitutions)
        after(block)
    return namespace
