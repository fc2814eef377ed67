"""``bench/loader_criterion.py``: the loader's criterion estimates read back as the page's tables,
and the shuffled IPC target judged from them."""

import json

from _scripts import load

criterion = load("loader_criterion.py")


def _estimate(directory, name, seconds):
    folder = directory / "loader" / name / "new"
    folder.mkdir(parents=True)
    nanos = seconds * 1e9
    interval = {"lower_bound": nanos * 0.9, "upper_bound": nanos * 1.1}
    (folder / "estimates.json").write_text(json.dumps({"median": {"point_estimate": nanos, "confidence_interval": interval}}))


def test_no_estimates_no_rows(tmp_path):
    assert criterion.rows(None) == []
    assert criterion.rows(tmp_path) == []


def test_passes_and_the_shuffled_target_from_the_estimates(tmp_path):
    for name, seconds in [
        ("ipc_mmap_1024", 0.050),
        ("ipc_mmap_shuffled_1024", 0.330),
        ("gather_reference_1024", 0.300),
        ("ipc_mmap_8192", 0.025),
        ("ipc_mmap_shuffled_8192", 0.300),
        ("gather_reference_8192", 0.200),
        ("parquet_1024", 0.160),
    ]:
        _estimate(tmp_path, name, seconds)
    text = "\n".join(criterion.rows(tmp_path))
    assert "| `loader/ipc_mmap/1024` | 0.050 | 0.045-0.055 |" in text
    assert "| `loader/parquet/1024` | 0.160 | 0.144-0.176 |" in text
    assert "### Shuffled IPC against a bare gather" in text
    assert "| 1,024 | 50.0 ms | 330.0 ms | 300.0 ms | 6.6x | 1.10x |" in text
    # 1.10x a bare gather meets the target's second form; 1.50x misses both.
    assert "| shuffled IPC, B = 1,024: at most 2x the ordered pass, or 1.2x a bare gather of the same rows | 6.6x, 1.10x | <= 2x or <= 1.2x | met |" in text
    assert "| shuffled IPC, B = 8,192: at most 2x the ordered pass, or 1.2x a bare gather of the same rows | 12.0x, 1.50x | <= 2x or <= 1.2x | **missed** |" in text
