// Boards as SVG for tengen's pages: tic-tac-toe cells, Connect Four columns, Go
// intersections with coordinates. drawBoard(svg, info, view, options) draws one
// position; info is /api/info's game description, view a board view:
//   board: rows of 0 (empty), 1 (player 0's stone), 2 (player 1's stone)
//   last_point: [row, col] of the last stone put down, or null
//   dead: actions of stones to mark dead, share: per-action visit share, or null
// Every point a person may click carries class "target" and data-action (the
// engine's action: row * cols + col, or the column for Connect Four).

import { el, text } from "./svg.js";


function percent(share) {
  return share >= 0.995 ? "100%" : share >= 0.1 ? `${Math.round(share * 100)}%` : `${(share * 100).toFixed(1)}%`;
}

// Cells (tic-tac-toe, gomoku) and columns (Connect Four): a grid of squares.
function drawGrid(svg, info, view, options) {
  const columns = info.kind === "columns";
  const cell = Math.min(96, Math.floor(480 / Math.max(info.rows, info.cols)));
  const top = columns ? 52 : 0; // Connect Four: column labels, then the visit shares above the board
  const width = info.cols * cell;
  const height = top + info.rows * cell;
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  el("rect", { x: 0, y: top, width, height: info.rows * cell, class: columns ? "frame columns" : "frame" }, svg);
  const share = options.share;
  for (let r = 0; r < info.rows; r++) {
    for (let c = 0; c < info.cols; c++) {
      const x = c * cell;
      const y = top + r * cell;
      const action = r * info.cols + c;
      el("rect", { x, y, width: cell, height: cell, class: "cell" }, svg);
      if (!columns) {
        text(info.moves[action], { x: x + 6, y: y + 16, class: "cell-label" }, svg);
        if (share && share[action] > 0 && view.board[r][c] === 0) heat(svg, x + cell / 2, y + cell / 2, cell * 0.42,
          action, share[action], "square");
      }
      const stone = view.board[r][c];
      if (stone) {
        const last = view.last_point && view.last_point[0] === r && view.last_point[1] === c;
        const g = el("g", { class: `stone player${stone - 1}${last ? " last" : ""}`, "data-player": stone - 1,
          "data-row": r, "data-col": c }, svg);
        if (columns) {
          el("circle", { cx: x + cell / 2, cy: y + cell / 2, r: cell * 0.4 }, g);
        } else if (stone === 1) {
          const d = cell * 0.28;
          el("path", { d: `M${x + cell / 2 - d} ${y + cell / 2 - d}L${x + cell / 2 + d} ${y + cell / 2 + d}` +
            `M${x + cell / 2 + d} ${y + cell / 2 - d}L${x + cell / 2 - d} ${y + cell / 2 + d}` }, g);
        } else {
          el("circle", { cx: x + cell / 2, cy: y + cell / 2, r: cell * 0.3 }, g);
        }
        if (last && !columns && share && share[action] > 0) {
          text(percent(share[action]), { x: x + cell - 6, y: y + cell - 7, class: "stone-share corner" }, g);
        }
      } else if (columns) {
        el("circle", { cx: x + cell / 2, cy: y + cell / 2, r: cell * 0.4, class: "hole" }, svg);
      }
    }
  }
  if (columns) {
    for (let c = 0; c < info.cols; c++) {
      text(info.column_labels[c], { x: c * cell + cell / 2, y: 19, class: "coordinate" }, svg);
      if (share && share[c] > 0) {
        // A cell above the column, the more opaque the more visits it got.
        const most = Math.max(...share);
        const g = el("g", { class: "heat", "data-action": c, "data-share": share[c].toFixed(4) }, svg);
        el("rect", { x: c * cell + 3, y: 26, width: cell - 6, height: 22, rx: 4,
          style: `fill-opacity: ${(0.15 + 0.85 * share[c] / most).toFixed(3)}` }, g);
        text(percent(share[c]), { x: c * cell + cell / 2, y: 41, class: "heat-label" }, g);
      }
    }
    for (let c = 0; c < info.cols; c++) {
      el("rect", { x: c * cell, y: 0, width: cell, height, class: "target", "data-action": c }, svg);
    }
  } else {
    for (let r = 0; r < info.rows; r++) {
      for (let c = 0; c < info.cols; c++) {
        el("rect", { x: c * cell, y: r * cell, width: cell, height: cell, class: "target",
          "data-action": r * info.cols + c }, svg);
      }
    }
  }
}

function heat(svg, cx, cy, radius, action, share, shape) {
  const g = el("g", { class: "heat", "data-action": action, "data-share": share.toFixed(4) }, svg);
  // Area grows with the share; even a sliver of visits stays visible.
  const r = radius * Math.max(0.18, Math.sqrt(share));
  if (shape === "square") el("rect", { x: cx - r, y: cy - r, width: 2 * r, height: 2 * r, rx: r * 0.2 }, g);
  else el("circle", { cx, cy, r }, g);
  if (share >= 0.01) text(percent(share), { x: cx, y: cy + 4, class: "heat-label" }, g);
}

// Go: lines between intersections, star points, coordinates on all four sides.
function drawGo(svg, info, view, options) {
  const n = info.rows;
  const step = Math.max(24, Math.min(48, Math.floor(560 / n)));
  const margin = step;
  const size = margin * 2 + step * (n - 1);
  svg.setAttribute("viewBox", `0 0 ${size} ${size}`);
  svg.setAttribute("width", size);
  svg.setAttribute("height", size);
  el("rect", { x: 0, y: 0, width: size, height: size, class: "goban" }, svg);
  const at = (i) => margin + i * step;
  for (let i = 0; i < n; i++) {
    el("line", { x1: at(0), y1: at(i), x2: at(n - 1), y2: at(i), class: "grid" }, svg);
    el("line", { x1: at(i), y1: at(0), x2: at(i), y2: at(n - 1), class: "grid" }, svg);
    for (const y of [margin * 0.45, size - margin * 0.3]) {
      text(info.column_labels[i], { x: at(i), y, class: "coordinate" }, svg);
    }
    for (const x of [margin * 0.4, size - margin * 0.4]) {
      text(info.row_labels[i], { x, y: at(i) + 4, class: "coordinate" }, svg);
    }
  }
  const edge = n >= 13 ? 3 : 2;
  const stars = n % 2 ? [edge, (n - 1) / 2, n - 1 - edge] : [edge, n - 1 - edge];
  for (const r of stars) for (const c of stars) el("circle", { cx: at(c), cy: at(r), r: 3, class: "star" }, svg);
  const dead = new Set(options.dead || []);
  const share = options.share;
  for (let r = 0; r < n; r++) {
    for (let c = 0; c < n; c++) {
      const action = r * n + c;
      const stone = view.board[r][c];
      if (stone) {
        const last = view.last_point && view.last_point[0] === r && view.last_point[1] === c;
        const isDead = dead.has(action);
        const g = el("g", { class: `stone player${stone - 1}${last ? " last" : ""}${isDead ? " dead" : ""}`,
          "data-player": stone - 1, "data-row": r, "data-col": c }, svg);
        el("circle", { cx: at(c), cy: at(r), r: step * 0.47 }, g);
        if (last && share && share[action] > 0) {
          // The move just played: its share of the visits, on the stone.
          text(percent(share[action]), { x: at(c), y: at(r) + 4, class: "stone-share" }, g);
        } else if (last) {
          el("circle", { cx: at(c), cy: at(r), r: step * 0.18, class: "marker" }, g);
        }
        if (isDead) {
          const d = step * 0.2;
          el("path", { d: `M${at(c) - d} ${at(r) - d}L${at(c) + d} ${at(r) + d}M${at(c) + d} ${at(r) - d}` +
            `L${at(c) - d} ${at(r) + d}`, class: "cross" }, g);
        }
      } else if (share && share[action] > 0) {
        heat(svg, at(c), at(r), step * 0.47, action, share[action], "circle");
      }
    }
  }
  for (let r = 0; r < n; r++) {
    for (let c = 0; c < n; c++) {
      el("circle", { cx: at(c), cy: at(r), r: step / 2, class: "target", "data-action": r * n + c }, svg);
    }
  }
}

export function drawBoard(svg, info, view, options = {}) {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  svg.setAttribute("data-game", info.game);
  if (info.kind === "go") drawGo(svg, info, view, options);
  else drawGrid(svg, info, view, options);
}

export { percent };
