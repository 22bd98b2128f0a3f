"""Storage engine benchmark: raw disk vs PartitionLog append, read and recovery.

    python bench/storage.py [--dir D] [--size-mib N] [--fsync-mib M] [--small-mib S] [--repeat R] [--keep]

Everything runs in a fresh temporary folder under ``--dir`` (default: the
system temp dir), removed at the end. Numbers to compare:

* raw write: 1 MiB ``write()`` calls then one ``fsync`` (what ``dd bs=1M conv=fsync`` does);
* append: 1 MiB batches through ``PartitionLog.append`` with the default flush
  policy, plus the closing ``flush()`` so it is comparable with the raw write;
* append with ``flush.messages=1``: an fsync per append (every append durable);
* read: ``read()`` and ``locate()`` + ``os.sendfile`` over the whole log, warm
  (page cache) and cold (pages dropped with ``posix_fadvise(DONTNEED)``);
* recovery: reopening a 1 GiB log after an unclean stop with the recovery
  point at 0, so every byte is read and CRC-checked and indexes rebuilt;
* small batches: appending ~1 KiB batches, recovering them, and
  ``PartitionLog.verify()`` over them (where the per-batch Python cost shows).
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

from needs import need  # noqa: E402  (bench/ is on sys.path when a bench runs as a script)

if __name__ == "__main__":
    need("logan_ray", "crc32c")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from logan_ray.storage.batch_header import iter_headers  # noqa: E402
from logan_ray.storage.config import TopicConfig  # noqa: E402
from logan_ray.storage.log import PartitionLog  # noqa: E402
from logan_ray.storage.record_builder import build_batch  # noqa: E402

MIB = 1 << 20


# --------------------------------------------------------------------- machine

def mount_of(path: str) -> tuple[str, str, str]:
    """(device, mount point, filesystem type) holding ``path``."""
    path = os.path.realpath(path)
    best = ("?", "/", "?")
    try:
        with open("/proc/mounts") as f:
            for line in f:
                dev, mnt, fstype, *_ = line.split()
                if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best[1]):
                    best = (dev, mnt, fstype)
    except OSError:
        pass
    return best


def rotational(device: str) -> str:
    name = os.path.basename(device)
    for candidate in (name, name.rstrip("0123456789")):
        p = f"/sys/block/{candidate}/queue/rotational"
        if os.path.exists(p):
            with open(p) as f:
                return "rotational" if f.read().strip() == "1" else "non-rotational"
    return "unknown"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def machine_info(directory: str) -> list[str]:
    dev, mnt, fstype = mount_of(directory)
    usage = shutil.disk_usage(directory)
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",)
    import crc32c

    return [
        f"platform:   {platform.platform()}",
        f"python:     {platform.python_version()} ({platform.python_implementation()})",
        f"cpu:        {os.cpu_count()} x {cpu_model()}; load average {' '.join(f'{x:.2f}' for x in load)}",
        f"crc32c:     {'hardware' if getattr(crc32c, 'hardware_based', False) else 'software'}",
        f"target dir: {directory}",
        f"filesystem: {fstype} on {dev} (mounted at {mnt}, {rotational(dev)} as reported by the kernel), "
        f"{usage.free / 2**30:.0f} GiB free of {usage.total / 2**30:.0f} GiB",
    ]


# ------------------------------------------------------------------- helpers

def drop_cache(paths: list[str]) -> None:
    """Evict clean pages of these files so the next read comes from the disk."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def quiesce() -> None:
    """Start each timed write run from a quiet disk: no dirty pages or pending discards of earlier runs."""
    os.sync()
    time.sleep(0.5)


def segment_files(directory: str) -> list[str]:
    return sorted(os.path.join(directory, n) for n in os.listdir(directory) if n.endswith(".log"))


def one_mib_batches(count: int) -> list[bytes]:
    """Distinct batches of 16 random ~64 KiB records, just under 1 MiB (Kafka's default max.message.bytes).

    Random and distinct because virtual disks may compress or deduplicate:
    repeated or compressible data would make writes look faster than they are.
    The raw-write baseline writes these very same bytes.
    """
    out = []
    for _ in range(count):
        b = build_batch([os.urandom(65_400) for _ in range(16)], timestamps=int(time.time() * 1000))
        assert len(b) <= 1_048_588, len(b)
        out.append(b)
    return out


def small_batch() -> bytes:
    """About 1 KiB: 10 records of 90 bytes, a typical small producer batch."""
    return build_batch([os.urandom(90) for _ in range(10)], timestamps=int(time.time() * 1000))


def crash_drop(log: PartitionLog) -> None:
    """Abandon a log like a killed process: no marker, recovery point forced to 0."""
    log._flusher.stop()
    for seg in log._segments:
        seg.close()
    log._closed = True
    with open(os.path.join(log.directory, "recovery-point-offset-checkpoint"), "w") as f:
        f.write("0\n")


def rate(nbytes: int, seconds: float) -> str:
    return f"{nbytes / MIB / seconds:8.1f} MiB/s"


# ---------------------------------------------------------------- benchmarks

def raw_write(directory: str, size_mib: int, blocks: list[bytes]) -> float:
    path = os.path.join(directory, "dd.bin")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    started = time.perf_counter()
    try:
        for i in range(size_mib):
            os.write(fd, blocks[i % len(blocks)])
        os.fsync(fd)
    finally:
        os.close(fd)
    elapsed = time.perf_counter() - started
    os.remove(path)
    return elapsed


def append_default(directory: str, size_mib: int, batches: list[bytes]) -> tuple[float, float, PartitionLog]:
    log = PartitionLog(os.path.join(directory, "append-0"))
    started = time.perf_counter()
    for i in range(size_mib):
        log.append(batches[i % len(batches)])
    appended = time.perf_counter() - started
    log.flush()
    return appended, time.perf_counter() - started, log


def append_fsync_each(directory: str, size_mib: int, batches: list[bytes]) -> tuple[float, list[float]]:
    log = PartitionLog(os.path.join(directory, "fsync-0"), TopicConfig.from_dict({"flush.messages": "1"}))
    latencies = []
    started = time.perf_counter()
    for i in range(size_mib):
        t = time.perf_counter()
        log.append(batches[i % len(batches)])
        latencies.append(time.perf_counter() - t)
    elapsed = time.perf_counter() - started
    log.delete()
    return elapsed, latencies


def read_all(log: PartitionLog, chunk: int) -> int:
    offset, total = log.log_start_offset, 0
    while offset < log.log_end_offset:
        data = log.read(offset, chunk)
        total += len(data)
        *_, (_, last) = iter_headers(data)
        offset = last.next_offset
    return total


def sendfile_all(log: PartitionLog, chunk: int) -> int:
    sink = os.open(os.devnull, os.O_WRONLY)
    fds: dict[str, int] = {}
    offset, total = log.log_start_offset, 0
    try:
        while offset < log.log_end_offset:
            slices = log.locate(offset, chunk)
            for s in slices:
                fd = fds.get(s.path)
                if fd is None:
                    fd = fds[s.path] = os.open(s.path, os.O_RDONLY)
                sent = 0
                while sent < s.length:
                    sent += os.sendfile(sink, fd, s.position + sent, s.length - sent)
                total += s.length
            last = slices[-1]
            with open(last.path, "rb") as f:
                f.seek(last.position)
                *_, (_, h) = iter_headers(f.read(last.length))
            offset = h.next_offset
    finally:
        os.close(sink)
        for fd in fds.values():
            os.close(fd)
    return total


def reopen(directory: str) -> PartitionLog:
    return PartitionLog(directory)


def timed(fn, *args):
    started = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - started, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where to create the temporary test folder")
    parser.add_argument("--size-mib", type=int, default=1024, help="data written by the raw, append and recovery runs")
    parser.add_argument("--fsync-mib", type=int, default=256, help="data for the fsync-per-append run")
    parser.add_argument("--small-mib", type=int, default=128, help="data for the small-batch recovery run")
    parser.add_argument("--read-chunk-mib", type=int, default=16, help="max_bytes of each read()/locate()")
    parser.add_argument("--repeat", type=int, default=5, help="alternating raw-write/append rounds (median reported)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()

    os.makedirs(args.dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="logan-storage-bench-", dir=args.dir)
    print("command: python bench/storage.py " + " ".join(sys.argv[1:]))
    for line in machine_info(work):
        print(line)
    print()
    rows: list[tuple[str, str, str]] = []

    def row(name: str, value: str, note: str = "") -> None:
        rows.append((name, value, note))
        print(f"  {name:<44} {value:>18}  {note}", flush=True)

    try:
        size = args.size_mib * MIB
        batches = one_mib_batches(min(args.size_mib, 64))
        bsize = len(batches[0])

        # Raw write and append alternate, repeated: a shared virtual disk is noisy
        # and the order of runs matters (writeback, discard of deleted files).
        raws, apps, app_flushes = [], [], []
        nbytes = args.size_mib * bsize
        log = None
        for r in range(args.repeat):
            if log is not None:
                log.delete()  # every timed run starts from an empty folder
            quiesce()
            raws.append(raw_write(work, args.size_mib, batches))
            quiesce()
            t_app, t_app_flush, log = append_default(work, args.size_mib, batches)
            apps.append(t_app)
            app_flushes.append(t_app_flush)

        def spread(times: list[float], n: int) -> str:
            lo, hi = n / MIB / max(times), n / MIB / min(times)
            return f"median of {len(times)}, range {lo:.0f}-{hi:.0f} MiB/s"

        t_raw, t_app, t_app_flush = (statistics.median(x) for x in (raws, apps, app_flushes))
        row(f"raw write, 1 MiB write() x {args.size_mib} + fsync", rate(nbytes, t_raw), spread(raws, nbytes))
        row("append 1 MiB batches (default flush policy)", rate(nbytes, t_app), f"{spread(apps, nbytes)}, no fsync")
        row("  ... including the closing flush()", rate(nbytes, t_app_flush), f"{spread(app_flushes, nbytes)}; {100 * t_raw / t_app_flush:.0f}% of raw write")

        quiesce()
        t_fs, lat = append_fsync_each(work, args.fsync_mib, batches)
        lat_ms = sorted(x * 1000 for x in lat)
        row(
            f"append 1 MiB + fsync each (flush.messages=1) x {args.fsync_mib}",
            rate(args.fsync_mib * bsize, t_fs),
            f"p50 {statistics.median(lat_ms):.1f} ms, p99 {lat_ms[int(len(lat_ms) * 0.99) - 1]:.1f} ms",
        )

        chunk = args.read_chunk_mib * MIB
        log_dir = log.directory
        log.close()
        log = reopen(log_dir)  # a fresh process view: every byte is CRC-checked once when first served
        t, n = timed(read_all, log, chunk)
        row(f"read() {args.read_chunk_mib} MiB at a time, first read (CRC check)", rate(n, t), "page cache")
        t, n = timed(read_all, log, chunk)
        row("read() again (already verified)", rate(n, t), "page cache")
        t, n = timed(sendfile_all, log, chunk)
        row("locate() + sendfile to /dev/null", rate(n, t), "page cache")
        log.close()
        drop_cache(segment_files(log_dir))
        log = reopen(log_dir)
        t, n = timed(read_all, log, chunk)
        row("read() cold, first read (CRC check)", rate(n, t), "after fadvise(DONTNEED)")
        log.close()
        drop_cache(segment_files(log_dir))
        log = reopen(log_dir)
        t, n = timed(sendfile_all, log, chunk)
        row("locate() + sendfile cold, first read (CRC check)", rate(n, t), "after fadvise(DONTNEED)")

        # Recovery: unclean stop, recovery point 0 -> every byte rescanned.
        crash_drop(log)
        t, log = timed(reopen, log_dir)
        rep = log.recovery_report
        assert rep.bytes_scanned == nbytes and not rep.clean_shutdown, rep
        row(f"recovery of {nbytes / 2**30:.2f} GiB, 1 MiB batches", f"{t:8.2f} s", f"{rate(nbytes, t).strip()}, page cache, {rep.batches_scanned} batches")
        crash_drop(log)
        drop_cache(segment_files(log_dir))
        t, log = timed(reopen, log_dir)
        row(f"recovery of {nbytes / 2**30:.2f} GiB, 1 MiB batches, cold", f"{t:8.2f} s", f"{rate(nbytes, t).strip()}, after fadvise(DONTNEED)")
        log.delete()

        if args.small_mib:
            small = small_batch()
            count = args.small_mib * MIB // len(small)
            slog = PartitionLog(os.path.join(work, "small-0"))
            group = small * 64  # 64 batches per append call (one produce request)
            t0 = time.perf_counter()
            for _ in range(count // 64):
                slog.append(group)
            t_small = time.perf_counter() - t0
            sbytes = slog.size_bytes
            row(f"append ~{len(small)} B batches, 64 per call", rate(sbytes, t_small), f"{(count // 64) * 64 / t_small:,.0f} batches/s")
            crash_drop(slog)
            t, slog = timed(reopen, slog.directory)
            rep = slog.recovery_report
            row(
                f"recovery of {sbytes / MIB:.0f} MiB of ~{len(small)} B batches",
                f"{t:8.2f} s",
                f"{rate(sbytes, t).strip()}, {rep.batches_scanned / t / 1e6:.2f} M batches/s",
            )
            nbatches = (count // 64) * 64
            verifies = []
            for _ in range(5):
                t, found = timed(slog.verify)
                assert not found, found
                verifies.append(t)
            row(
                f"verify() of {sbytes / MIB:.0f} MiB of ~{len(small)} B batches",
                f"{min(verifies):8.3f} s",
                f"best of 5, {min(verifies) / nbatches * 1e6:.2f} us per batch (full CRC scan, page cache)",
            )
            slog.delete()
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
