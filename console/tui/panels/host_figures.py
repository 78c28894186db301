"""psutil figures: CPU, memory, page cache, dirty and writeback pages, disk IO."""

from __future__ import annotations

from rich.text import Text

from console.tui.format import size


def render(state, focus=None):
    f = (state.host or {}).get("figures")
    if not f:
        return Text("host not sampled yet", style="dim")
    io = f.get("disk_io") or {}
    load = f.get("load") or []
    text = Text()
    text.append(f"CPU {f.get('cpu_percent', 0):.0f} % of {f.get('cpus')} cores  load "
                + " ".join(f"{x:.2f}" for x in load) + "\n")
    text.append(f"memory {f.get('mem_percent', 0):.0f} % used, "
                f"{size(f.get('mem_available'))} available of {size(f.get('mem_total'))}\n")
    text.append(f"page cache {size(f.get('page_cache') or f.get('cached'))}  ")
    dirty = f.get("dirty")
    text.append(f"dirty {size(dirty)}  ", style="yellow" if dirty and dirty > 1 << 30 else "")
    text.append(f"writeback {size(f.get('writeback'))}\n")
    text.append(f"disk read {size(io.get('read_bytes_per_s'))}/s  "
                f"write {size(io.get('write_bytes_per_s'))}/s")
    return text
