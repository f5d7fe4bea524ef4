// The dashboard's live updates: draw the page's Plotly figures, then poll for news (no reload).
"use strict";

const POLL_MS = Number(document.body.dataset.pollMs || 2000);
const CONFIG = {displaylogo: false, responsive: true};

function drawFigures(figures) {
  for (const [id, figure] of Object.entries(figures || {})) {
    const div = document.getElementById(id);
    if (div && figure) Plotly.react(div, figure.data, figure.layout, CONFIG);
  }
}

function markLive(ok) {
  const live = document.getElementById("live");
  if (!live) return;
  live.classList.toggle("stale", !ok);
  live.title = ok ? "updated " + new Date().toLocaleTimeString() : "no answer from the server";
  live.dataset.updates = String(Number(live.dataset.updates || 0) + (ok ? 1 : 0));
}

async function poll(url, apply) {
  try {
    const response = await fetch(url, {credentials: "same-origin", cache: "no-store"});
    if (!response.ok) throw new Error(response.status);
    const keepGoing = await apply(response);
    markLive(true);
    if (keepGoing === false) return;
  } catch (err) {
    markLive(false);
  }
  setTimeout(() => poll(url, apply), POLL_MS);
}

function startJobsPage(table) {
  const body = table.querySelector("tbody");
  poll(table.dataset.rowsUrl, async (response) => { body.innerHTML = await response.text(); });
}

function startJobPage(job) {
  if (job.dataset.active !== "true") return;
  poll(job.dataset.liveUrl, async (response) => {
    const doc = await response.json();
    drawFigures(doc.figures);
    for (const [id, html] of Object.entries(doc.html)) document.getElementById(id).innerHTML = html;
    document.getElementById("log").textContent = doc.log_tail;
    job.dataset.active = String(doc.active);
    return doc.active;  // a finished job has no more news
  });
}

document.addEventListener("DOMContentLoaded", () => {
  const figures = document.getElementById("figures");
  if (figures) drawFigures(JSON.parse(figures.textContent));
  const table = document.getElementById("jobs");
  if (table) startJobsPage(table);
  const job = document.getElementById("job");
  if (job) startJobPage(job);
});
