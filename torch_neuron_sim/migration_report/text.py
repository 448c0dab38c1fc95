"""The migration report as plain text: what `python -m torch_neuron_sim report`
prints at exit and Report.text() returns, from the report's model (Report.data)."""
from __future__ import annotations

from typing import Any

from .format import gib, short_site, size


def render_text(data: dict[str, Any]) -> str:
    d = data
    out = ["", "=" * 78, " torch_neuron_sim migration report"
           f"  (native-op table {d['native_op_table']}, dtype policy {d['dtype_policy']})", "=" * 78]
    fb = d["fallback_ops"]
    out.append(f"\nOps that fall back to CPU on Trainium: {len(fb)} op(s), "
               f"{sum(f['count'] for f in fb)} call(s)")
    for f in fb:
        copied = f"  {size(f['bytes_copied'])} copied" if "bytes_copied" in f else ""
        out.append(f"  {f['op']:<58} {f['count']:>8} call(s){copied}")
        for s in f["sites"][:5]:
            out.append(f"      {s['count']:>6} x  {short_site(s['site'])}")
        if len(f["sites"]) > 5:
            out.append(f"      ... {len(f['sites']) - 5} more source line(s)")
    if not fb:
        out.append("  none: every op ran natively")
    nat = d["native_ops"]
    out.append(f"\nNative ops (run on the NeuronCore): {len(nat)} op(s), {sum(n['count'] for n in nat)} call(s)")
    for n in nat[:12]:
        out.append(f"  {n['op']:<58} {n['count']:>8} call(s)")
    if len(nat) > 12:
        out.append(f"  ... and {len(nat) - 12} more (--json lists all)")
    nk = d.get("nki_kernels", [])
    if nk:
        out.append(f"\nNKI kernels used: {len(nk)} kernel(s), {sum(k['count'] for k in nk)} launch(es)")
        for k in nk:
            out.append(f"  {k['kernel']:<58} {k['count']:>8} launch(es)")
    dc = d["downcasts_64bit"]
    out.append(f"\n64-bit values computed in 32 bits (native ops): {len(dc)} op(s)")
    for c in dc:
        out.append(f"  {c['op']:<58} float64->float32: {c['float64']:>6}   int64->int32: {c['int64']:>6}")
    out.append(f"  casts to/from 64-bit types done on the host: {d['host_casts_64bit']}")
    hc = d.get("host_copies")
    if hc is not None:
        out.append(f"\nHost <-> device copies outside fallbacks (.cpu(), .to(), .item()): {hc['count']}, "
                   f"{size(hc['bytes'])}")
    un = d["unsupported_features"]
    out.append(f"\nUnsupported features hit: {len(un)}")
    for u in un:
        out.append(f"  {u['feature']:<58} {u['count']:>8} time(s)")
    wr = d.get("would_round_on_trainium", [])
    if wr:
        out.append(f"\nInteger results that would round on Trainium (computed in fp32, exact below 2^24): "
                   f"{sum(w['count'] for w in wr)} call(s)")
        for w in wr:
            out.append(f"  {w['op']:<58} {w['count']:>8} call(s)")
            for s in w["sites"][:5]:
                out.append(f"      {s['count']:>6} x  {short_site(s['site'])}")
    co = d.get("collectives", [])
    out.append(f"\nCollectives (c10d backend 'neuron'): {sum(c['count'] for c in co)} call(s), "
               f"{size(sum(c['bytes'] for c in co))} moved")
    for c in co:
        out.append(f"  {c['op']:<44} {c['count']:>8} call(s) {size(c['bytes']):>12}")
        for s in c["sites"][:5]:
            out.append(f"      {s['count']:>6} x  {short_site(s['site'])}  ({size(s['bytes'])})")
        if len(c["sites"]) > 5:
            out.append(f"      ... {len(c['sites']) - 5} more source line(s)")
    pp = d.get("point_to_point", [])
    if pp:
        out.append(f"\nPoint-to-point (send/recv on the c10d backend 'neuron'): {sum(c['count'] for c in pp)} "
                   f"call(s), {size(sum(c['bytes'] for c in pp))} moved")
        out.append("  The pre-release neuron backend had no point-to-point operations, and AWS calls pipeline "
                   "parallelism")
        out.append("  'available soon': confirm send/recv on your TorchNeuron release before relying on them.")
        for c in pp:
            out.append(f"  {c['op']:<44} {c['count']:>8} call(s) {size(c['bytes']):>12}")
            for s in c["sites"][:5]:
                out.append(f"      {s['count']:>6} x  {short_site(s['site'])}  ({size(s['bytes'])})")
    out.append("\nPeak HBM per device (allocated; reserved by the caching allocator, against capacity):")
    for m in d["memory"]:
        out.append(f"  {m['device']:<10} {gib(m['peak_bytes'])} allocated; {gib(m['peak_reserved_bytes'])} reserved "
                   f"of {gib(m['capacity_bytes'])} ({100 * m['fraction']:.2f}%)")
    if not d["memory"]:
        out.append("  no device memory used")
    c = d["compilation"]
    out.append(f"\nEager compilations (distinct op signatures): {c['distinct_signatures']}, "
               f"cache hits: {c['cache_hits']}")
    if c["simulated_ms_per_compile"]:
        out.append(f"  simulated compile time: {c['simulated_ms_per_compile'] * c['distinct_signatures'] / 1000:.2f} s"
                   f" ({c['simulated_ms_per_compile']:g} ms each, NEURON_SIM_COMPILE_MS)")
    out.append(f"  ops with >= {c['many_shapes_threshold']} signatures (dynamic-shape risk under torch.compile): "
               f"{len(c['ops_with_many_shapes'])}")
    for m in c["ops_with_many_shapes"][:10]:
        out.append(f"  {m['op']:<58} {m['signatures']:>8} signatures")
    if len(c["ops_with_many_shapes"]) > 10:
        out.append(f"  ... and {len(c['ops_with_many_shapes']) - 10} more (--json lists all)")
    tc = d.get("torch_compile")
    if tc and (tc["graphs"] or tc["graph_breaks"]):
        out.append(f"\ntorch.compile(backend='neuron'): {tc['compiled_graphs']} graph(s) compiled, "
                   f"{tc['fallback_graphs']} run eagerly (failed to compile), {tc['recompiles']} recompile(s), "
                   f"{sum(b['count'] for b in tc['graph_breaks'])} graph break(s)")
        for g in tc["graphs"][:20]:
            what = (f"eager: no Neuron lowering for {', '.join(g['fallback_ops'])}"
                    if g["executor"] == "eager-fallback" else f"{g['executor']}, cache {g['cache']}")
            out.append(f"  {g['name']:<40} {g['node_count']:>5} nodes  {g['launches']:>6} launch(es)  {what}")
            if g["recompile_reason"]:
                out.append(f"      recompiled because: {g['recompile_reason']}")
        if len(tc["graphs"]) > 20:
            out.append(f"  ... and {len(tc['graphs']) - 20} more (--json lists all)")
        for b in tc["graph_breaks"][:10]:
            out.append(f"  graph break x{b['count']}: {b['reason']}")
    t = d.get("device_timeline")
    if t and t["events_total"]:
        out.append(f"\nSimulated device timeline: ESTIMATE from the cost model ({t['profile']} at LNC={t['lnc']}, "
                   "docs/profiling.md)" + (f"; trace written to {t['trace']}" if t.get("trace") else ""))
        out.append(f"  {t['events_total']} device event(s); busiest stream {t['total_seconds'] * 1e3:.3f} ms: "
                   + ", ".join(f"{b} {v * 1e3:.3f} ms" for b, v in t["breakdown"].items() if v))
        from ..profiler.estimate import adaptive_eager_line
        if adaptive_eager_line(t):
            out.append("  " + adaptive_eager_line(t))
        for o in t["ops"][:8]:
            out.append(f"  {o['name'][:50]:<50} {o['count']:>6} x {o['seconds'] * 1e6 / o['count']:>10.1f} us"
                       f"  {o['bound']}")
    if d.get("error"):
        out.append(f"\nThe program raised: {d['error']}")
    out.append("=" * 78)
    return "\n".join(out) + "\n"
