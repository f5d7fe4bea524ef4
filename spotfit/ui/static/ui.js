// The dashboard's live updates: draw the page's Plotly figures, then poll for news (no reload).
"use strict";

const POLL_MS = Number(document.body.dataset.pollMs || 2000);
const CONFIG = {displaylogo: false, responsive: true};

function drawFigures(figures) {
  for (const [id, figure] of Object.entries(figures || {})) {
    const div = document.getElementById(id);
    if (!div || !figure) continue;
    div.hidden = false;  // a chart with no data yet waits hidden (a sweep before its first value)
    Plotly.react(div, figure.data, figure.layout, CONFIG);
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

// The rows came with the page: the first news is due one period later, and rows that did not
// change are not laid out again.
function startJobsPage(table) {
  const body = table.querySelector("tbody");
  let last = null;
  setTimeout(() => poll(table.dataset.rowsUrl, async (response) => {
    const html = await response.text();
    if (html !== last) body.innerHTML = last = html;
  }), POLL_MS);
}

// A job's hindsight figures (the optimum, the regret, what each policy would have paid) come apart:
// replaying every policy on the job's window takes seconds the first time, and the page does not
// wait for them. One request at a time; a failed one is tried again a period later.
let hindsightInFlight = false;
async function loadHindsight(job) {
  if (hindsightInFlight) return;
  hindsightInFlight = true;
  try {
    const response = await fetch(job.dataset.hindsightUrl, {credentials: "same-origin", cache: "no-store"});
    if (!response.ok) throw new Error(response.status);
    const doc = await response.json();
    for (const [id, html] of Object.entries(doc.html)) document.getElementById(id).innerHTML = html;
    job.dataset.pending = "false";
  } catch (err) {
    markLive(false);
    setTimeout(() => loadHindsight(job), POLL_MS);
  } finally {
    hindsightInFlight = false;
  }
}

// A job's or a sweep's page: figures and sections (HTML) from its live URL, while it runs.
function startLivePage(root) {
  if (root.dataset.active !== "true") return;
  poll(root.dataset.liveUrl, async (response) => {
    const doc = await response.json();
    drawFigures(doc.figures);
    for (const [id, html] of Object.entries(doc.html)) document.getElementById(id).innerHTML = html;
    if ("log_tail" in doc) document.getElementById("log").textContent = doc.log_tail;
    if (doc.pending) loadHindsight(root);  // the attempts changed: their hindsight figures are due again
    root.dataset.active = String(doc.active);
    return doc.active;  // a finished job or sweep has no more news
  });
}

// No inline handlers (the CSP allows scripts from ui.js and plotly.min.js alone): a filter that
// submits its form on change says so with `data-submit-on-change`.
function wireForms() {
  for (const select of document.querySelectorAll("[data-submit-on-change]")) {
    select.addEventListener("change", () => select.form.submit());
  }
  // The plan form: a spec file picked here is read by the page and sent as text; the server opens no file.
  const file = document.getElementById("spec-file");
  if (file) {
    file.addEventListener("change", async () => {
      if (file.files.length) document.getElementById("spec").value = await file.files[0].text();
    });
  }
}

document.addEventListener("DOMContentLoaded", () => {
  wireForms();
  const figures = document.getElementById("figures");
  if (figures) drawFigures(JSON.parse(figures.textContent));
  const table = document.getElementById("jobs");
  if (table) startJobsPage(table);
  const job = document.getElementById("job");
  if (job && job.dataset.pending === "true") loadHindsight(job);
  for (const id of ["job", "sweep"]) {
    const root = document.getElementById(id);
    if (root) startLivePage(root);
  }
});
