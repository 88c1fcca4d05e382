"""No silent overwrite: `record` refuses existing traces (every sibling it writes, named up front)
unless --force and a trace another process writes; `export` never replaces its input or any HDF5 file."""



from inspector.cli import main
from tests.test_traces_locking import add_run, new_writer


def test_record_refuses_existing_traces_naming_every_sibling(tmp_path, capsys):
    out = tmp_path / "e1.h5"
    (tmp_path / "e1-dense.h5").write_bytes(b"precious")
    assert main(["record", "-e", "e1", "-q", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("moe-inspector record: error: -o/--output: ") and "Traceback" not in err
    assert "e1-dense.h5 already exists" in err and str(out) in err and "--force" in err
    assert (tmp_path / "e1-dense.h5").read_bytes() == b"precious" and not out.exists()


def test_record_refuses_a_trace_being_written_even_with_force(tmp_path, capsys):
    out = tmp_path / "busy.h5"
    with new_writer(out) as first:
        add_run(first, "r0")
        before = out.read_bytes()
        assert main(["record", "-e", "example", "-q", "--force", "-o", str(out)]) == 2
        assert "another process is writing" in capsys.readouterr().err
        assert out.read_bytes() == before


def test_record_with_a_name_too_long_is_one_line(tmp_path, capsys):
    assert main(["record", "-q", "-o", str(tmp_path / ("a" * 300 + ".h5"))]) == 2
    err = capsys.readouterr().err
    assert "File name too long" in err and "Traceback" not in err and len(err.splitlines()) == 1


def test_export_never_writes_over_its_input_or_an_hdf5_file(small_trace_path, tmp_path, capsys):
    before = small_trace_path.read_bytes()
    assert main(["export", str(small_trace_path), "--format", "png", "-o", str(small_trace_path)]) == 2
    assert "is the trace being exported" in capsys.readouterr().err
    other = tmp_path / "other.h5"
    other.write_bytes(before)
    assert main(["export", str(small_trace_path), "--format", "csv", "-o", str(other)]) == 2
    assert "is an HDF5 file" in capsys.readouterr().err
    assert small_trace_path.read_bytes() == before and other.read_bytes() == before
