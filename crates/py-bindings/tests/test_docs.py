"""Every Python example of the repository's Markdown pages (README.md, docs/*.md and any other
page) runs, page by page, as a reader would run it, against the installed wheel.

Each page's blocks run in order in one namespace (``_markdown_snippets.py`` finds and runs
them), in a fresh working directory that holds the files of ``_snippet_files.FILES`` that the
page names. Examples that need a service get a real one, on loopback:

- S3 (a page that names ``s3://``): moto's server, with the bucket ``bucket`` of
  ``_snippet_files.OBJECTS``, reached through ``AWS_ENDPOINT_URL`` and key variables as a user
  sets them; an endpoint the page writes out, ``http://127.0.0.1:9000``, is replaced by the
  server's;
- Ray (a block that uses ``ray``): a local instance of 2 CPUs, started before the page's first
  such block and stopped after its last, as ``test_ray.py`` starts it;
- ``torch.distributed`` (a page that names it): a gloo group of one process, made by the test
  unless the page makes it itself (``MASTER_ADDR`` and ``MASTER_PORT`` are set for it).

A failure names the page, the block's first line, the error and the page's lines in the
traceback. Blocks marked ``python no-run <reason>`` are listed in ``NOT_RUN``, so that a new one
is seen in review.
"""

import gc
import importlib.util
import os
import re
import shutil
import socket
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _load(name):
    """A helper module beside this file, loaded by path (the tests run with
    ``--import-mode=importlib`` and are not a package)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


_snippets = _load("_markdown_snippets")
_files = _load("_snippet_files")

#: The S3 endpoint that pages write out in examples, replaced by the test server's endpoint.
DOCUMENTED_ENDPOINT = "http://127.0.0.1:9000"

#: Every block marked ``python no-run <reason>``: (page, reason). Keep it short: an example that
#: can run should.
NOT_RUN = {("docs/text.md", "a signature, not a call")}

_PYTHON_FENCE = re.compile(
    r"^ *(`{3,}|~{3,})\s*(python3?|py|pycon)\b", re.MULTILINE | re.IGNORECASE
)
_USES_RAY = re.compile(r"\bray\.|^\s*(import|from)\b.*\bray\b", re.MULTILINE)
_USES_DISTRIBUTED = re.compile(r"\btorch\.distributed\b|\binit_process_group\b")


def _relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


#: The pages with at least one Python block, found anew at every run.
PAGES_WITH_PYTHON = [
    _relative(path)
    for path in _snippets.pages(ROOT)
    if _PYTHON_FENCE.search(path.read_text(encoding="utf-8"))
]


def _blocks(page: str):
    return _snippets.parse(ROOT / page, page)


class _MadeFiles:
    """The files of ``FILES``, each made once, on first use, with those above it in the table."""

    def __init__(self, directory: Path):
        self.directory = directory

    def copy_named(self, code: str, destination: Path) -> None:
        """Copies into ``destination`` every file that ``code`` names, with its modification
        time (which a saved loader state records)."""
        names = list(_files.FILES)
        needed = [name for name in names if name in code]
        for name in names[: max((names.index(name) + 1 for name in needed), default=0)]:
            if not (self.directory / name).exists():
                _files.FILES[name](self.directory / name)
        for name in needed:
            shutil.copy2(self.directory / name, destination / name)


@pytest.fixture(scope="module")
def made_files(tmp_path_factory):
    return _MadeFiles(tmp_path_factory.mktemp("doc-files"))


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory):
    """moto's S3 server on loopback with the bucket ``bucket`` of ``OBJECTS``; its endpoint."""
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    client.create_bucket(Bucket="bucket")
    directory = tmp_path_factory.mktemp("doc-objects")
    for key, write in _files.OBJECTS.items():
        local = directory / key.replace("/", "-")
        write(local)
        client.upload_file(str(local), "bucket", key)
    yield endpoint
    server.stop()


def _point_at_s3(endpoint, monkeypatch):
    """The environment of a user of that S3 server: endpoint, region and keys, nothing else."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


class _Ray:
    """A local Ray instance, up from before the first of ``blocks`` to after the last (never,
    when ``blocks`` is empty)."""

    def __init__(self, blocks):
        self.first, self.last = (blocks[0], blocks[-1]) if blocks else (None, None)
        self.started = False

    def before(self, block):
        if block is self.first:
            import ray

            ray.init(
                num_cpus=2,
                object_store_memory=100 << 20,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
            ray.data.DataContext.get_current().enable_progress_bars = False
            self.started = True

    def after(self, block):
        if block is self.last:
            self.stop()

    def stop(self):
        if self.started:
            import ray

            ray.shutdown()
            self.started = False


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _distributed_group(blocks, monkeypatch):
    """Sets the environment of a one-process gloo group, and makes it unless a block does."""
    import torch.distributed as dist

    for name, value in {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(_free_port()),
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "1",
    }.items():
        monkeypatch.setenv(name, value)
    if not any("init_process_group" in block.code for block in blocks):
        dist.init_process_group("gloo", rank=0, world_size=1)


def _run_with_services(blocks, made_files, request, monkeypatch, directory):
    """Runs a page's blocks in ``directory`` with the files and services they name; returns the
    failure's message, or None."""
    code = "".join(block.code for block in blocks if block.mode != "no-run")
    made_files.copy_named(code, directory)
    monkeypatch.chdir(directory)

    substitutions = {}
    if "s3://" in code or DOCUMENTED_ENDPOINT in code:
        endpoint = request.getfixturevalue("s3_endpoint")
        _point_at_s3(endpoint, monkeypatch)
        substitutions[DOCUMENTED_ENDPOINT] = endpoint
    ray = _Ray([block for block in blocks if _USES_RAY.search(block.code)])
    distributed = _USES_DISTRIBUTED.search(code) is not None
    if distributed:
        _distributed_group(blocks, monkeypatch)

    namespace = {}
    try:
        _snippets.run_page(blocks, substitutions, ray.before, ray.after, namespace)
    except _snippets.SnippetFailure as error:
        return str(error)
    finally:
        namespace.clear()  # the page's loaders, files and threads go before its directory
        ray.stop()
        if distributed:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
        gc.collect()
    return None


@pytest.mark.parametrize("page", PAGES_WITH_PYTHON)
def test_the_python_examples_of_the_page_run(page, made_files, request, monkeypatch, tmp_path):
    blocks = failure = None
    try:
        blocks = _blocks(page)
    except _snippets.MarkdownError as error:
        failure = str(error)
    if blocks is not None:
        failure = _run_with_services(blocks, made_files, request, monkeypatch, tmp_path)
    if failure is not None:
        pytest.fail(failure, pytrace=False)


def test_the_pages_are_found_and_every_python_block_is_collected():
    pages = [_relative(path) for path in _snippets.pages(ROOT)]
    assert "README.md" in pages and "docs/loader.md" in pages, pages
    assert not any(page.startswith(("target/", ".git/")) for page in pages), pages
    for page in PAGES_WITH_PYTHON:
        fences = len(_PYTHON_FENCE.findall((ROOT / page).read_text(encoding="utf-8")))
        assert len(_blocks(page)) == fences, page


def test_the_blocks_that_do_not_run_are_marked_with_a_reason_and_listed():
    marked = [
        block
        for page in PAGES_WITH_PYTHON
        for block in _blocks(page)
        if block.mode == "no-run"
    ]
    listing = "\n".join(f"  {block.page}:{block.line}: {block.reason}" for block in marked)
    assert {(block.page, block.reason) for block in marked} == NOT_RUN, (
        f"{len(marked)} blocks are marked no-run; NOT_RUN must list exactly these:\n{listing}"
    )


# The runner itself, on pages written here.


def _page(tmp_path, text):
    path = tmp_path / "page.md"
    path.write_text(text, encoding="utf-8")
    return _snippets.parse(path, "docs/page.md")


def _failure(blocks, substitutions=None) -> str:
    with pytest.raises(_snippets.SnippetFailure) as raised:
        _snippets.run_page(blocks, substitutions or {})
    return str(raised.value)


def test_a_failing_block_is_named_by_page_and_line_with_its_error(tmp_path):
    blocks = _page(
        tmp_path,
        "# A page\n\n```python\ncolumn = [1, 2]\n```\n\nText.\n\n"
        "```python\nlengths = len(column)\npadded = rebuild(column, lengths)\n```\n",
    )
    assert [block.line for block in blocks] == [4, 10]
    message = _failure(blocks)
    assert message.startswith(
        "docs/page.md, the python block at line 10: NameError: name 'rebuild' is not defined\n"
    ), message
    # The traceback names the page's line and shows it.
    assert 'File "docs/page.md", line 11, in <module>' in message, message
    assert "padded = rebuild(column, lengths)" in message, message


def test_a_block_sees_what_the_earlier_blocks_of_its_page_defined(tmp_path):
    blocks = _page(tmp_path, "```python\nx = 2\n```\n\n```python\ny = x * 21\n```\n")
    assert _snippets.run_page(blocks, {})["y"] == 42


def test_what_a_block_prints_is_compared_with_the_text_block_after_it(tmp_path):
    text = "```python\nprint(6 * 7)\nprint('done')\n```\n\nwhich prints\n\n```text\n{}\ndone\n```\n"
    blocks = _page(tmp_path, text.format(42))
    assert blocks[0].output == "42\ndone" and blocks[0].output_line == 9
    _snippets.run_page(blocks, {})
    message = _failure(_page(tmp_path, text.format(41)))
    assert "docs/page.md, the python block at line 2 printed other than the text block at line 9" in message
    assert "-41\n+42" in message, message


def test_a_doctest_block_compares_each_output(tmp_path):
    blocks = _page(tmp_path, "```python\n>>> 6 * 7\n42\n>>> [0] * 2\n[0, 1]\n```\n")
    assert blocks[0].mode == "doctest"
    message = _failure(blocks)
    assert message.startswith("docs/page.md, the python block at line 2: 1 of 2 examples failed")
    assert 'File "docs/page.md", line 4' in message and "[0, 1]" in message, message


def test_substitutions_replace_text_before_the_block_runs(tmp_path):
    blocks = _page(tmp_path, f'```python\nurl = "{DOCUMENTED_ENDPOINT}/a"\n```\n')
    assert _snippets.run_page(blocks, {DOCUMENTED_ENDPOINT: "http://h:1"})["url"] == "http://h:1/a"


def test_a_no_run_block_is_not_run_and_needs_a_reason(tmp_path):
    blocks = _page(tmp_path, "```python no-run: a signature\nf(x, *, y=...) -> z\n```\n")
    assert [(block.mode, block.reason) for block in blocks] == [("no-run", "a signature")]
    assert _snippets.run_page(blocks, {}) == {"__name__": "__main__"}
    with pytest.raises(_snippets.MarkdownError, match="line 2 is marked no-run without a reason"):
        _page(tmp_path, "```python no-run\nf(x)\n```\n")


def test_unclosed_fences_and_unknown_info_strings_are_refused(tmp_path):
    with pytest.raises(_snippets.MarkdownError, match="fence at line 3 is never closed"):
        _page(tmp_path, "Text.\n\n```python\nx = 1\n")
    with pytest.raises(_snippets.MarkdownError, match="unknown info string 'python norun'"):
        _page(tmp_path, "```python norun\nx = 1\n```\n")


def test_blocks_inside_list_items_lose_the_items_indent(tmp_path):
    blocks = _page(tmp_path, "- An item:\n\n   ```python\n   x = 1\n   if x:\n       y = 2\n   ```\n")
    assert blocks[0].code == "x = 1\nif x:\n    y = 2\n"
    assert _snippets.run_page(blocks, {})["y"] == 2


def test_a_page_that_names_torch_distributed_runs_in_a_gloo_group_of_one(
    made_files, request, monkeypatch, tmp_path
):
    import torch.distributed as dist

    blocks = _page(
        tmp_path,
        "```python\nimport torch.distributed as dist\n\n"
        "print(dist.get_rank(), dist.get_world_size(), dist.get_backend())\n```\n\n"
        "prints\n\n```text\n0 1 gloo\n```\n",
    )
    assert _run_with_services(blocks, made_files, request, monkeypatch, tmp_path) is None
    assert not dist.is_initialized()


def test_a_page_is_given_the_files_it_names_and_no_other(made_files, request, monkeypatch, tmp_path):
    blocks = _page(
        tmp_path,
        "```python\nimport os\nimport pyarrow.parquet as pq\n\n"
        'print(pq.read_schema("tokens.parquet").names, sorted(os.listdir()))\n```\n\n'
        "which prints\n\n```text\n['input_ids', 'label'] ['page.md', 'tokens.parquet']\n```\n",
    )
    assert _run_with_services(blocks, made_files, request, monkeypatch, tmp_path) is None
