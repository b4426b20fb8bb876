// Line plots as plain SVG for tengen's run page: no library, no build step.
// linePlot(svg, spec) draws one plot into svg (emptied first):
//   title, xLabel, yLabel: text; series: [{name, points: [[x, y], ...]}] (y null: a gap)
//   steps: draw each series as a step line (a value holds until the next point)
//   markers: a dot on every point, with its label (spec.label(point, series)) as a tooltip
//   errorBars: (point) => its standard error: a bar from y - e to y + e with caps, for every
//     point whose error is a number (class "error-bar", data-series its series' name)
//   xMin, xMax, yMin, yMax: an axis's ends (default: the data's, widened to nice ticks)
//   legend: name the series even when there is one; legendAt: "top" (default: curves that
//     fall, losses, leave the top right free) or "bottom" (curves that rise, strength)
//   empty: what to say when no series has a point
// Each series' path carries class "series" and data-series (its name) and data-points
// (how many points it draws), for the tests and for CSS.

import { el, text } from "./svg.js";
const WIDTH = 460;
const HEIGHT = 250;
const MARGIN = { left: 62, right: 14, top: 30, bottom: 44 };


// About `count` round tick values (1, 2 or 5 times a power of ten) covering [low, high].
export function niceTicks(low, high, count = 5) {
  if (!(high > low)) {
    const pad = Math.abs(low) > 0 ? Math.abs(low) * 0.1 : 1;
    low -= pad;
    high += pad;
  }
  const raw = (high - low) / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw);
  const ticks = [];
  for (let v = Math.floor(low / step) * step; v <= high + step * 1e-9; v += step) ticks.push(+v.toPrecision(12));
  if (ticks[ticks.length - 1] < high) ticks.push(+(ticks[ticks.length - 1] + step).toPrecision(12));
  return ticks;
}

export function formatNumber(v) {
  const a = Math.abs(v);
  if (a >= 1e6) return `${+(v / 1e6).toPrecision(3)}M`;
  if (a >= 1e4) return `${+(v / 1e3).toPrecision(3)}k`;
  if (a >= 100 || v === 0) return `${Math.round(v)}`;
  return `${+v.toPrecision(3)}`;
}

export function linePlot(svg, spec) {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  svg.setAttribute("viewBox", `0 0 ${WIDTH} ${HEIGHT}`);
  svg.setAttribute("class", "plot");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", spec.title);
  text(spec.title, { x: WIDTH / 2, y: 18, class: "plot-title" }, svg);
  const series = spec.series.map((s) => ({ ...s, points: s.points.filter((p) => p[1] !== null && p[1] !== undefined
    && Number.isFinite(p[1]) && Number.isFinite(p[0])) }));
  const all = series.flatMap((s) => s.points);
  const inner = { w: WIDTH - MARGIN.left - MARGIN.right, h: HEIGHT - MARGIN.top - MARGIN.bottom };
  text(spec.xLabel, { x: MARGIN.left + inner.w / 2, y: HEIGHT - 6, class: "axis-label" }, svg);
  text(spec.yLabel, { x: 0, y: 0, class: "axis-label",
    transform: `translate(14 ${MARGIN.top + inner.h / 2}) rotate(-90)` }, svg);
  if (!all.length) {
    el("rect", { x: MARGIN.left, y: MARGIN.top, width: inner.w, height: inner.h, class: "plot-frame" }, svg);
    text(spec.empty || "no data yet", { x: MARGIN.left + inner.w / 2, y: MARGIN.top + inner.h / 2,
      class: "plot-empty" }, svg);
    return;
  }
  const xs = all.map((p) => p[0]);
  const err = (p) => (spec.errorBars ? Number(spec.errorBars(p)) : NaN);
  const ys = all.flatMap((p) => (Number.isFinite(err(p)) ? [p[1] - err(p), p[1] + err(p)] : [p[1]]));
  const xTicks = niceTicks(spec.xMin ?? Math.min(...xs), spec.xMax ?? Math.max(...xs));
  const yTicks = niceTicks(spec.yMin ?? Math.min(...ys), spec.yMax ?? Math.max(...ys));
  // Given ends are the axis's (a time axis ends at the newest line, not at a round number).
  const [x0, x1] = spec.xMin !== undefined && spec.xMax !== undefined && spec.xMax > spec.xMin
    ? [spec.xMin, spec.xMax] : [xTicks[0], xTicks[xTicks.length - 1]];
  const [y0, y1] = [spec.yMin ?? yTicks[0], spec.yMax ?? yTicks[yTicks.length - 1]];
  const X = (x) => MARGIN.left + ((x - x0) / (x1 - x0 || 1)) * inner.w;
  const Y = (y) => MARGIN.top + inner.h - ((y - y0) / (y1 - y0 || 1)) * inner.h;
  el("rect", { x: MARGIN.left, y: MARGIN.top, width: inner.w, height: inner.h, class: "plot-frame" }, svg);
  for (const t of yTicks) {
    if (t < y0 || t > y1) continue;
    el("line", { x1: MARGIN.left, x2: MARGIN.left + inner.w, y1: Y(t), y2: Y(t), class: "grid-line" }, svg);
    text(formatNumber(t), { x: MARGIN.left - 5, y: Y(t) + 4, class: "tick y" }, svg);
  }
  for (const t of xTicks) {
    if (t < x0 - 1e-9 || t > x1 + 1e-9) continue;
    el("line", { x1: X(t), x2: X(t), y1: MARGIN.top + inner.h, y2: MARGIN.top + inner.h + 4, class: "tick-mark" },
      svg);
    text(formatNumber(t), { x: X(t), y: MARGIN.top + inner.h + 16, class: "tick x" }, svg);
  }
  series.forEach((s, i) => {
    if (!s.points.length) return;
    let d = "";
    s.points.forEach(([x, y], j) => {
      if (j === 0) d += `M${X(x).toFixed(1)} ${Y(y).toFixed(1)}`;
      else if (spec.steps) d += `H${X(x).toFixed(1)}V${Y(y).toFixed(1)}`;
      else d += `L${X(x).toFixed(1)} ${Y(y).toFixed(1)}`;
    });
    if (spec.steps && spec.extendTo !== undefined) d += `H${X(Math.max(spec.extendTo, s.points.at(-1)[0])).toFixed(1)}`;
    el("path", { d, class: `series s${i}`, "data-series": s.name, "data-points": s.points.length }, svg);
    if (s.points.length === 1 && !spec.markers) {
      el("circle", { cx: X(s.points[0][0]), cy: Y(s.points[0][1]), r: 2.5, class: `marker s${i}` }, svg);
    }
    if (spec.errorBars) {
      for (const p of s.points) {
        const e = err(p);
        if (!Number.isFinite(e)) continue;
        const [x, lo, hi] = [X(p[0]), Y(Math.max(p[1] - e, y0)), Y(Math.min(p[1] + e, y1))];
        const bar = `M${x.toFixed(1)} ${lo.toFixed(1)}V${hi.toFixed(1)}` +
          `M${(x - 3).toFixed(1)} ${lo.toFixed(1)}h6M${(x - 3).toFixed(1)} ${hi.toFixed(1)}h6`;
        el("path", { d: bar, class: `error-bar s${i}`, "data-series": s.name }, svg);
      }
    }
    if (spec.markers) {
      for (const p of s.points) {
        const dot = el("circle", { cx: X(p[0]), cy: Y(p[1]), r: 3.5, class: `marker s${i}` }, svg);
        if (spec.label) el("title", {}, dot).textContent = spec.label(p, s);
      }
    }
  });
  const named = series.filter((s) => s.points.length);
  if (named.length > 1 || spec.legend) {
    named.forEach((s, k) => {
      const i = series.indexOf(s);
      const y = spec.legendAt === "bottom"
        ? MARGIN.top + inner.h - 8 - (named.length - 1 - k) * 14
        : MARGIN.top + 12 + k * 14;
      const x = MARGIN.left + inner.w - 96;
      el("line", { x1: x, x2: x + 16, y1: y - 4, y2: y - 4, class: `series s${i}` }, svg);
      text(s.name, { x: x + 20, y, class: "legend" }, svg);
    });
  }
}
