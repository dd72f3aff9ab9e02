/* global document, addEventListener */
// Charts of /api/summary with uPlot (shipped with the package).
import uPlot from './vendor/uPlot.esm.js';
import { duration, el, fill } from './dom.js';

const plots = new Map();

function size(node) {
  const width = Math.max(260, Math.floor(node.getBoundingClientRect().width) - 8);
  return { width, height: width < 500 ? 200 : 260 };
}

const secondsAxis = { label: 'time', values: (_u, values) => values.map((value) => duration(value)), size: 70 };

const SPECS = {
  lead: (summary) => ({
    title: 'From /proofgate automerge to merge (by day)',
    data: [summary.mergeLeadTime.day, summary.mergeLeadTime.p50, summary.mergeLeadTime.p90],
    series: [{}, { label: 'p50', stroke: '#2f6f4f', width: 2, points: { show: true } }, { label: 'p90', stroke: '#c0392b', width: 2, points: { show: true } }],
    axes: [{}, secondsAxis],
  }),
  review: (summary) => ({
    title: 'Review duration',
    data: [summary.reviewDuration.at, summary.reviewDuration.seconds],
    series: [{}, { label: 'review', stroke: '#1f5f8b', width: 1, points: { show: true, size: 5 } }],
    axes: [{}, secondsAxis],
  }),
  queue: (summary) => ({
    title: 'Merge queue depth',
    data: [summary.queueDepth.at, summary.queueDepth.depth],
    series: [{}, { label: 'changes', stroke: '#8e44ad', width: 2, fill: 'rgba(142,68,173,0.12)', paths: uPlot.paths.stepped({ align: 1 }) }],
    axes: [{}, { label: 'changes', size: 50 }],
  }),
};

function stageCounts(root, stages) {
  const node = root.querySelector('[data-stage-counts]');
  if (node)
    fill(
      node,
      Object.entries(stages ?? {})
        .map(([stage, count]) => `${stage} ${count}`)
        .join(' · '),
    );
}

/** Draw (or update) the three charts in `root`. */
export function renderCharts(root, summary) {
  if (!root.querySelector('.charts')) {
    plots.forEach((plot) => plot.destroy());
    plots.clear();
    const grid = el('div', { class: 'charts' });
    fill(root, el('h1', {}, 'Charts'), el('p', { class: 'muted', 'data-stage-counts': '' }), grid);
    // Every box first, then the plots: each is sized to its box in the finished grid.
    const boxes = Object.keys(SPECS).map((key) => grid.appendChild(el('section', { class: 'chart', 'data-chart': key })));
    for (const [index, key] of Object.keys(SPECS).entries()) {
      const spec = SPECS[key](summary);
      const box = boxes[index];
      const plot = new uPlot({ ...size(box), title: spec.title, series: spec.series, axes: spec.axes, scales: { x: { time: true } } }, spec.data, box);
      plots.set(key, plot);
    }
    stageCounts(root, summary.stages);
    return;
  }
  for (const key of Object.keys(SPECS)) plots.get(key)?.setData(SPECS[key](summary).data);
  stageCounts(root, summary.stages);
}

addEventListener('resize', () => {
  for (const [key, plot] of plots) {
    const box = document.querySelector(`[data-chart="${key}"]`);
    if (box) plot.setSize(size(box));
  }
});
