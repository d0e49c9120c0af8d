// The chart library as the dashboard imports it (`../vendor/uplot.esm.js`, served from node_modules by
// src/dashboard/index.ts): uPlot's own declarations.
import uPlot from 'uplot';

export default uPlot;
