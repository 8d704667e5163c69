// kbroker console: plain DOM, no library. Each view builds its controls once and refreshes its
// data by polling the broker's JSON endpoints (broker/console/__init__.py) every POLL_MS while
// "live" is on and the tab is visible. Every value from the broker is set with textContent.
"use strict";

const POLL_MS = 2000;
const PAGE = 50;
let current = null;       // {update} of the mounted view
let timer = null;
let actions = false;      // console.actions.enable

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

async function api(path, options) {
  const response = await fetch("api/" + path, options);
  const body = await response.json().catch(() => ({message: response.statusText}));
  if (!response.ok) {
    const err = new Error(body.message || body.error || response.statusText);
    err.code = body.error;
    throw err;
  }
  return body;
}

function act(method, path, body) {
  return api(path, {method, headers: {"Content-Type": "application/json"},
                    body: body === undefined ? undefined : JSON.stringify(body)});
}

const enc = encodeURIComponent;
const fmtBytes = n => n < 1024 ? n + " B" : n < 1 << 20 ? (n / 1024).toFixed(1) + " KiB"
  : (n / (1 << 20)).toFixed(1) + " MiB";
const fmtTime = ms => ms < 0 ? "—" : new Date(ms).toISOString().replace("T", " ").replace("Z", "");
const num = v => h("td", {class: "num"}, v === null || v === undefined ? "—" : v);
const pill = (text, cls) => h("span", {class: "pill " + (cls || text)}, text);

function table(id, headers, rows) {
  return h("table", {id},
    h("thead", {}, h("tr", {}, headers.map(x => h("th", {class: x.endsWith(" ") ? "num" : ""},
                                                    x.trim())))),
    h("tbody", {}, rows));
}

function fill(container, ...children) {
  // `actions && form(...)` is false when actions are off: nothing, not the text "false"
  container.replaceChildren(...children.flat().filter(c => c !== null && c !== undefined &&
                                                          c !== false));
}

function status(text, cls) {
  const el = document.getElementById("status");
  el.textContent = text;
  el.className = "status " + (cls || "");
}

function pager(result, onPage) {
  const last = result.offset + result.items.length;
  return h("div", {class: "pager"},
    h("button", {type: "button", disabled: result.offset === 0,
                 onclick: () => onPage(Math.max(result.offset - result.limit, 0))}, "‹ prev"),
    h("span", {class: "muted"}, `${result.total ? result.offset + 1 : 0}–${last} of ${result.total}`),
    h("button", {type: "button", disabled: last >= result.total,
                 onclick: () => onPage(result.offset + result.limit)}, "next ›"));
}

function actionForm(id, fields, label, run) {
  const out = h("span", {class: "result", id: id + "-result"});
  const form = h("form", {class: "action", id}, fields, h("button", {id: id + "-submit"}, label),
                 out);
  form.addEventListener("submit", async event => {
    event.preventDefault();
    out.className = "result muted";
    out.textContent = "…";
    try {
      const result = await run();
      out.className = "result ok";
      out.textContent = "done: " + JSON.stringify(result);
      refresh();
    } catch (err) {
      out.className = "result error";
      out.textContent = (err.code ? err.code + ": " : "") + err.message;
    }
  });
  return form;
}

// ---------------------------------------------------------------- topics

function topicsView(root) {
  let offset = 0;
  const filter = h("input", {id: "topic-filter", placeholder: "filter topics",
                             oninput: () => { offset = 0; refresh(); }});
  const internal = h("input", {type: "checkbox", id: "topic-internal", onchange: refresh});
  const list = h("div", {id: "topic-list"});
  const name = h("input", {id: "create-topic-name", placeholder: "topic name", required: true});
  const parts = h("input", {id: "create-topic-partitions", type: "number", min: 1, value: 1,
                            style: "width:5em"});
  fill(root, h("h1", {}, "Topics"),
    h("div", {class: "bar"}, filter, h("label", {}, internal, " internal topics")),
    actions && actionForm("create-topic", [name, parts], "Create topic",
      () => act("POST", "topics", {name: name.value, partitions: Number(parts.value)})),
    list);
  return async () => {
    const q = `topics?filter=${enc(filter.value)}&internal=${internal.checked}` +
              `&offset=${offset}&limit=${PAGE}`;
    const result = await api(q);
    fill(list, table("topics-table", ["Topic", "Partitions ", "Offsets ", "Size "],
      result.items.map(t => h("tr", {"data-topic": t.name},
        h("td", {}, h("a", {href: "#/topics/" + enc(t.name)}, t.name),
          t.internal ? " " : null, t.internal ? pill("internal") : null),
        num(t.partitions), num(t.offsets), num(fmtBytes(t.size_bytes))))),
      pager(result, o => { offset = o; refresh(); }));
  };
}

function renderBytes(v) {
  if (v === null || v === undefined) return h("span", {class: "muted"}, "null");
  const text = v.encoding === "json" ? JSON.stringify(v.json, null, 2) : v.text;
  return h("div", {}, h("span", {class: "enc"}, v.encoding + (v.truncated ? ", cut" : "")),
           h("pre", {}, text));
}

function topicView(root, name) {
  const cards = h("div", {class: "cards", id: "topic-cards"});
  const partitions = h("div", {id: "topic-partitions"});
  const configs = h("div", {id: "topic-configs"});
  const partition = h("select", {id: "browse-partition"}, h("option", {value: ""}, "all partitions"));
  const from = h("select", {id: "browse-from"},
    ["end", "beginning", "offset", "timestamp"].map(x => h("option", {value: x}, "from " + x)));
  const at = h("input", {id: "browse-at", placeholder: "offset or time (ms / ISO)",
                         style: "width:14em"});
  const limit = h("input", {id: "browse-limit", type: "number", min: 1, max: 500, value: 50,
                            style: "width:5em"});
  const messages = h("div", {id: "messages"});
  let loadedPartitions = -1;

  async function browse() {
    let q = `topics/${enc(name)}/messages?from=${from.value}&limit=${limit.value}`;
    if (partition.value !== "") q += `&partition=${partition.value}`;
    if (from.value === "offset") q += `&offset=${enc(at.value || 0)}`;
    if (from.value === "timestamp") {
      const ms = /^\d+$/.test(at.value) ? at.value : Date.parse(at.value);
      q += `&timestamp=${enc(ms)}`;
    }
    try {
      const result = await api(q);
      fill(messages, table("messages-table",
        ["Partition ", "Offset ", "Timestamp", "Key", "Value", "Headers", ""],
        result.messages.map(r => h("tr", {class: r.control ? "control" : r.transaction || "",
                                        "data-offset": r.offset, "data-partition": r.partition},
          num(r.partition), num(r.offset), h("td", {}, fmtTime(r.timestamp)),
          h("td", {}, r.error ? h("span", {class: "error"}, r.error) : renderBytes(r.key)),
          h("td", {}, r.control ? h("span", {class: "muted"}, "transaction marker")
                                : renderBytes(r.value)),
          h("td", {}, (r.headers || []).map(x => h("div", {}, x.key + ": ",
            x.value === null ? "null" : x.value.encoding === "json"
              ? JSON.stringify(x.value.json) : x.value.text))),
          h("td", {}, r.control ? pill(r.control) : r.transaction ? pill(r.transaction) : null)))),
        result.messages.length ? null : h("p", {class: "muted"}, "no messages"));
    } catch (err) {
      fill(messages, h("p", {class: "error"}, err.message));
    }
  }

  const key = h("input", {id: "produce-key", placeholder: "key"});
  const value = h("input", {id: "produce-value", placeholder: "value", style: "width:20em"});
  const target = h("input", {id: "produce-partition", type: "number", min: 0, value: 0,
                             style: "width:4em"});
  fill(root, h("h1", {}, "Topic ", h("span", {id: "topic-name"}, name)), cards,
    h("h2", {}, "Partitions"), partitions,
    h("h2", {}, "Messages"),
    h("div", {class: "bar"}, partition, from, at, limit,
      h("button", {type: "button", id: "browse-load", onclick: browse}, "Load")),
    messages,
    actions && h("h2", {}, "Actions"),
    actions && actionForm("produce", [target, key, value], "Produce test message",
      () => act("POST", `topics/${enc(name)}/messages`,
                {partition: Number(target.value), key: key.value || null, value: value.value})),
    actions && actionForm("delete-topic", [], "Delete topic", async () => {
      if (!confirm(`Delete topic ${name}?`)) throw new Error("cancelled");
      const r = await act("DELETE", `topics/${enc(name)}`);
      location.hash = "#/topics";
      return r;
    }),
    h("h2", {}, "Configs"), configs);
  browse();
  return async () => {
    const t = await api(`topics/${enc(name)}`);
    fill(cards, [["Partitions", t.partition_count], ["Offsets", t.offsets],
                 ["Size", fmtBytes(t.size_bytes)], ["Topic id", t.topic_id]]
      .map(([k, v]) => h("div", {class: "card"}, k, h("b", {}, v))));
    fill(partitions, table("partitions-table",
      ["Partition ", "Start offset ", "End offset ", "Last stable offset ", "Size "],
      t.partitions.map(p => h("tr", {}, num(p.partition), num(p.start_offset),
        num(p.end_offset), num(p.last_stable_offset), num(fmtBytes(p.size_bytes))))));
    fill(configs, table("configs-table", ["Config", "Value", ""],
      t.configs.map(c => h("tr", {class: c.is_default ? "" : "differs"},
        h("td", {}, c.name), h("td", {}, c.value),
        h("td", {}, c.is_default ? h("span", {class: "muted"}, "default") : pill("set"))))));
    if (loadedPartitions !== t.partitions.length) {
      loadedPartitions = t.partitions.length;
      const chosen = partition.value;
      fill(partition, h("option", {value: ""}, "all partitions"),
        t.partitions.map(p => h("option", {value: p.partition}, "partition " + p.partition)));
      partition.value = chosen;
    }
    if (from.value === "end") await browse();
  };
}

// ---------------------------------------------------------------- groups

function groupsView(root) {
  let offset = 0;
  const filter = h("input", {id: "group-filter", placeholder: "filter groups",
                             oninput: () => { offset = 0; refresh(); }});
  const state = h("select", {id: "group-state", onchange: refresh},
    ["", "Stable", "Empty", "PreparingRebalance", "CompletingRebalance", "Assigning",
     "Reconciling", "NotReady"].map(s => h("option", {value: s}, s || "any state")));
  const type = h("select", {id: "group-type", onchange: refresh},
    ["", "classic", "consumer", "share", "streams"].map(s =>
      h("option", {value: s}, s || "any protocol")));
  const list = h("div", {id: "group-list"});
  fill(root, h("h1", {}, "Consumer groups"), h("div", {class: "bar"}, filter, state, type), list);
  return async () => {
    const result = await api(`groups?filter=${enc(filter.value)}&state=${state.value}` +
                             `&type=${type.value}&offset=${offset}&limit=${PAGE}`);
    fill(list, result.loading ? h("p", {class: "muted"}, `${result.loading} coordinator ` +
      "shards are still loading: their groups appear once loaded") : null,
      table("groups-table", ["Group", "Type", "State", "Members ", "Generation ", "Lag "],
      result.items.map(g => h("tr", {"data-group": g.group_id},
        h("td", {}, h("a", {href: "#/groups/" + enc(g.group_id)}, g.group_id)),
        h("td", {}, g.type), h("td", {}, pill(g.state)), num(g.members), num(g.generation),
        num(g.lag)))),
      pager(result, o => { offset = o; refresh(); }));
  };
}

function lagChart(samples) {
  const width = 600, height = 110, pad = 4;
  if (samples.length < 2) {
    return h("p", {class: "muted", id: "lag-chart"},
             "lag over time appears after a few seconds of watching");
  }
  const t0 = samples[0][0], t1 = samples[samples.length - 1][0];
  const top = Math.max(1, ...samples.map(s => s[1]));
  const points = samples.map(([t, lag]) =>
    `${(pad + (t - t0) / Math.max(t1 - t0, 1) * (width - 2 * pad)).toFixed(1)},` +
    `${(height - pad - lag / top * (height - 2 * pad)).toFixed(1)}`).join(" ");
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  svg.setAttribute("class", "chart");
  svg.setAttribute("id", "lag-chart");
  const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
  line.setAttribute("points", points);
  svg.append(line);
  return h("div", {}, svg, h("div", {class: "muted"},
    `max ${top} over ${Math.round((t1 - t0) / 1000)} s; now ${samples[samples.length - 1][1]}`));
}

function timeline(rebalances) {
  if (!rebalances.length) return h("p", {class: "muted", id: "rebalances"}, "no rebalance yet");
  const longest = Math.max(1, ...rebalances.map(r => r.duration_ms));
  return h("div", {class: "timeline", id: "rebalances"}, rebalances.map(r =>
    h("div", {class: "rebalance", "data-cause": r.cause, "data-outcome": r.outcome},
      h("div", {}, h("b", {}, fmtTime(r.started_ms)), " ", pill(r.cause, "cause"), " ",
        pill(r.outcome, r.outcome === "stable" ? "Stable" : r.outcome === "in progress"
          ? "PreparingRebalance" : "Empty"),
        ` generation ${r.from_generation} → ${r.generation}, ${r.duration_ms} ms`,
        r.members === null ? "" : `, ${r.members} member${r.members === 1 ? "" : "s"}`),
      h("div", {class: "phases", title: "phases"},
        Object.entries(r.phases_ms).map(([phase, ms]) => h("div", {
          class: "phase " + phase, title: `${phase}: ${ms} ms`,
          style: `width:${(ms / longest * 100).toFixed(2)}%`}))),
      h("div", {class: "muted"},
        Object.entries(r.phases_ms).map(([p, ms]) => `${p} ${ms} ms`).join(" · "),
        " — ", r.reason),
      r.joined.length ? h("div", {}, "joined: ", r.joined.map(j => j.member_id +
        (j.client_id ? ` (${j.client_id})` : "")).join(", "),
        r.more_joined ? ` and ${r.more_joined} more` : "") : null,
      r.left.length ? h("div", {}, "left: ", r.left.map(j => `${j.member_id} (${j.why})`)
        .join(", "), r.more_left ? ` and ${r.more_left} more` : "") : null)));
}

function groupView(root, groupId) {
  const cards = h("div", {class: "cards", id: "group-cards"});
  const chart = h("div", {id: "lag"});
  const members = h("div", {id: "group-members"});
  const offsets = h("div", {id: "group-offsets"});
  const history = h("div", {id: "group-history"});
  const shared = h("div", {id: "share-partitions"});
  const to = h("select", {id: "reset-to"},
    ["earliest", "latest", "timestamp"].map(x => h("option", {value: x}, "to " + x)));
  const when = h("input", {id: "reset-timestamp", placeholder: "time (ms / ISO)"});
  const topic = h("input", {id: "reset-topic", placeholder: "topic (all committed if empty)"});
  fill(root, h("h1", {}, "Group ", h("span", {id: "group-id"}, groupId)), cards,
    h("h2", {}, "Lag over time"), chart,
    h("h2", {}, "Members"), members,
    h("h2", {}, "Committed offsets and lag"), offsets, shared,
    actions && h("h2", {}, "Actions"),
    actions && actionForm("reset", [to, when, topic], "Reset offsets", () => {
      const body = {to: to.value};
      if (topic.value) body.topic = topic.value;
      if (to.value === "timestamp") {
        body.timestamp = /^\d+$/.test(when.value) ? Number(when.value) : Date.parse(when.value);
      }
      return act("POST", `groups/${enc(groupId)}/reset-offsets`, body);
    }),
    actions && actionForm("delete-group", [], "Delete group", async () => {
      if (!confirm(`Delete group ${groupId}?`)) throw new Error("cancelled");
      const r = await act("DELETE", `groups/${enc(groupId)}`);
      location.hash = "#/groups";
      return r;
    }),
    h("h2", {}, "Rebalance history"), history);
  return async () => {
    const g = await api(`groups/${enc(groupId)}`);
    const consumer = g.type === "consumer" || g.type === "share" || g.type === "streams";
    const protocol = {consumer: "consumer (KIP-848)", share: "share (KIP-932)",
                      streams: "streams (KIP-1071)"}[g.type] || "classic";
    fill(cards, [["State", pill(g.state)], ["Protocol", protocol],
      [consumer ? "Assignor" : "Assignor (protocol)", consumer ? g.assignor : g.protocol || "—"],
      [consumer ? "Group epoch" : "Generation", consumer ? g.group_epoch : g.generation],
      ["Members", g.members.length], ["Lag", h("span", {id: "group-lag"}, g.lag)]]
      .map(([k, v]) => h("div", {class: "card"}, k, h("b", {}, v))));
    fill(chart, lagChart(g.lag_history));
    fill(members, table("members-table",
      ["Member", "Client id", "Host", g.type === "streams" ? "Process id" : "Instance id",
       g.type === "streams" ? "Tasks" : "Assigned partitions"],
      g.members.map(m => h("tr", {"data-member": m.member_id},
        h("td", {}, m.member_id, m.leader ? " " : null, m.leader ? pill("leader") : null),
        h("td", {}, m.client_id), h("td", {}, m.client_host),
        h("td", {}, (g.type === "streams" ? m.process_id : m.instance_id) ?? "—"),
        h("td", {class: "assignment"}, m.tasks ? memberTasks(m.tasks) :
          Object.entries(m.assignment).map(([t, ps]) =>
            h("div", {}, `${t}: ${ps.join(", ")}`)))))));
    fill(offsets, table("offsets-table",
      ["Topic", "Partition ", "Committed ", "End offset ", "Lag ", "Owner"],
      g.offsets.map(o => h("tr", {"data-tp": `${o.topic}-${o.partition}`},
        h("td", {}, o.topic), num(o.partition), num(o.committed), num(o.end_offset),
        num(o.lag), h("td", {}, o.member_id ?? "—")))));
    fill(history, timeline(g.rebalances));
    fill(shared, g.type === "share" ? sharePartitions(g.share_partitions) :
      g.type === "streams" ? streamsTopology(g.topology) : null);
  };
}

/* A streams-group member's tasks by kind ("0_1": subtopology 0, partition 1). */
function memberTasks(tasks) {
  return ["active", "standby", "warmup"].filter(k => tasks[k].length).map(k =>
    h("div", {}, `${k}: ${tasks[k].join(", ")}`));
}

/* A streams group's topology, drawn left to right: each subtopology with the topics it reads,
   its state stores' changelogs, and the repartition topics it writes (which the next reads). */
function streamsTopology(t) {
  if (!t) return null;
  const topics = (names, cls) => h("div", {class: `topics ${cls}`},
    names.map(n => h("div", {class: "topic"}, n)));
  return [h("h2", {}, `Topology (epoch ${t.epoch})`),
    h("div", {id: "topology"}, t.subtopologies.map(s =>
      h("div", {class: "subtopology", "data-subtopology": s.id},
        topics([...s.source_topics, ...s.repartition_source_topics], "in"),
        h("div", {class: "arrow"}, "→"),
        h("div", {class: "node"}, h("b", {}, `Subtopology ${s.id}`),
          s.changelog_topics.map(n => h("div", {class: "muted"}, `store ⇄ ${n}`))),
        h("div", {class: "arrow"}, s.repartition_sink_topics.length ? "→" : ""),
        topics(s.repartition_sink_topics, "out"))))];
}

/* A share group's share partitions: start offset, in-flight records by state, and each
   record's state, deliveries, owner and lock expiry (archived ones too). */
function sharePartitions(parts) {
  const dash = v => v === null || v === undefined ? "—" : String(v);
  return [h("h2", {}, "Share partitions"),
    table("share-partitions-table",
      ["Topic", "Partition ", "Start offset ", "End offset ", "Available ", "Acquired ",
       "Accepted ", "Archived "],
      parts.map(p => h("tr", {"data-tp": `${p.topic}-${p.partition}`}, h("td", {}, p.topic),
        num(p.partition), num(p.start_offset), num(p.end_offset), num(p.counts.available),
        num(p.counts.acquired), num(p.counts.acknowledged), num(p.counts.archived)))),
    h("h2", {}, "In-flight records"),
    table("share-records-table",
      ["Topic", "Partition ", "Offset ", "State", "Deliveries ", "Member", "Lock expires in ms "],
      parts.flatMap(p => p.records.map(r => h("tr", {"data-record": `${p.topic}-${p.partition}-${r.offset}`},
        h("td", {}, p.topic), num(p.partition), num(r.offset), h("td", {}, pill(r.state)),
        h("td", {class: "num"}, `${r.delivery_count} of ${p.delivery_count_limit}`),
        h("td", {}, dash(r.member_id)), h("td", {class: "num"}, dash(r.lock_expires_in_ms)))))),
    h("h2", {}, "Archived records (latest first)"),
    table("share-archived-table", ["Topic", "Partition ", "Offset ", "Deliveries ", "Why"],
      parts.flatMap(p => p.archived.map(a => h("tr", {}, h("td", {}, p.topic), num(p.partition),
        num(a.offset), num(a.delivery_count), h("td", {}, a.reason)))))];
}

// ---------------------------------------------------------------- broker

function brokerView(root) {
  let offset = 0;
  const cards = h("div", {class: "cards"});
  const listeners = h("div", {id: "listeners"});
  const apis = h("div", {id: "apis"});
  const conns = h("div", {id: "connections"});
  const filter = h("input", {id: "setting-filter", placeholder: "filter settings",
                             oninput: () => refresh()});
  const changed = h("input", {type: "checkbox", id: "setting-changed", onchange: refresh});
  const settings = h("div", {id: "settings"});
  fill(root, h("h1", {}, "Broker"), cards, h("h2", {}, "Listeners"), listeners,
    h("h2", {}, "Requests by API"), apis, h("h2", {}, "Connections"), conns,
    h("h2", {}, "Settings"),
    h("div", {class: "bar"}, filter, h("label", {}, changed, " only those that differ"),
      h("span", {class: "muted"}, "highlighted: differs from Kafka's default")),
    settings);
  return async () => {
    const b = await api(`broker?offset=${offset}&limit=${PAGE}`);
    fill(cards, [["Node id", b.node_id], ["Cluster id", b.cluster_id], ["Topics", b.topics],
      ["Groups", b.groups], ["Connections", b.connections.total],
      ["Actions", b.actions ? "on" : "off (read-only)"]]
      .map(([k, v]) => h("div", {class: "card"}, k, h("b", {}, v))));
    fill(listeners, table("listeners-table", ["Listener", "Bound", "Advertised", "Security"],
      b.listeners.map(l => h("tr", {}, h("td", {}, l.name), h("td", {}, `${l.host}:${l.port}`),
        h("td", {}, l.advertised), h("td", {}, l.security_protocol)))));
    fill(apis, table("apis-table", ["API", "Requests ", "Per second ", "Errors"],
      b.apis.map(a => h("tr", {}, h("td", {}, a.api), num(a.requests), num(a.per_second),
        h("td", {}, Object.entries(a.errors).map(([e, n]) => h("div", {class: "error"},
          `${e}: ${n}`)))))));
    fill(conns, table("connections-table",
      ["Peer", "Listener", "Security", "Principal", "Idle ms ", "In flight "],
      b.connections.items.map(c => h("tr", {}, h("td", {}, c.peer), h("td", {}, c.listener),
        h("td", {}, c.security_protocol), h("td", {}, c.principal), num(c.idle_ms),
        num(c.in_flight)))),
      pager(b.connections, o => { offset = o; refresh(); }));
    const text = filter.value.toLowerCase();
    fill(settings, table("settings-table", ["Setting", "Value", "Default here", "Kafka's default"],
      b.settings.filter(s => s.name.includes(text) && (!changed.checked || s.non_default ||
                                                      s.differs_from_kafka))
        .map(s => h("tr", {class: s.differs_from_kafka ? "differs" : "", title: s.doc,
                           "data-setting": s.name},
          h("td", {}, s.name), h("td", {}, String(s.value ?? "—"),
            s.non_default ? " " : null, s.non_default ? pill("set") : null),
          h("td", {}, String(s.default ?? "—")),
          h("td", {}, s.kafka_setting ? String(s.kafka_default ?? "—") : "(kbroker only)")))));
  };
}

// ---------------------------------------------------------------- routing and polling

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const root = document.getElementById("view");
  const view = parts[0] || "topics";
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.dataset.view === view);
  }
  if (view === "topics" && parts[1]) current = topicView(root, parts.slice(1).join("/"));
  else if (view === "groups" && parts[1]) current = groupView(root, parts.slice(1).join("/"));
  else if (view === "groups") current = groupsView(root);
  else if (view === "broker") current = brokerView(root);
  else current = topicsView(root);
  refresh();
}

let running = false;
async function refresh() {
  if (!current || running) return;
  running = true;
  const update = current;
  try {
    await update();
    status("updated " + new Date().toLocaleTimeString(), "");
  } catch (err) {
    status(err.message, "error");
  } finally {
    running = false;
  }
}

function schedule() {
  clearInterval(timer);
  timer = setInterval(() => {
    if (document.getElementById("live").checked && !document.hidden) refresh();
  }, POLL_MS);
}

async function start() {
  try {
    actions = (await api("overview")).actions;
  } catch (err) {
    status(err.message, "error");
  }
  window.addEventListener("hashchange", route);
  route();
  schedule();
}

start();
