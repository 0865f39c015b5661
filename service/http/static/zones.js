// Times in one zone for a whole picture: the user's (the UTC offset of their latest turn), this
// browser's, or UTC. A turn's `at` comes with the offset it was sent with (events.at_offset_s);
// a memory's times come in UTC. Shown side by side they must be read in the same zone, or a due
// time of "15:00" said in Beijing reads as 23:00 beside a turn at 20:03.
//
// Safety rule for every module of the inspector: data from the API is only ever written with
// textContent / text nodes / numeric SVG attributes, never parsed as HTML (see dom.js).

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const WEEK = 7 * DAY;
const MONDAY = 4 * DAY; // 1970-01-01 was a Thursday: weeks start four days after the epoch

// "+08:00" for 28800.
export function offsetText(seconds) {
  const sign = seconds < 0 ? "−" : "+";
  const abs = Math.abs(Math.round(seconds / 60));
  return `${sign}${String(Math.floor(abs / 60)).padStart(2, "0")}:${String(abs % 60).padStart(2, "0")}`;
}

// The offset an ISO time was written with, in seconds east of UTC (null when it has none).
export function offsetOf(iso) {
  const m = /(Z|([+-])(\d{2}):?(\d{2}))$/.exec(String(iso || ""));
  if (!m) return null;
  if (m[1] === "Z") return 0;
  return (m[2] === "-" ? -1 : 1) * (Number(m[3]) * 3600 + Number(m[4]) * 60);
}

function fixed(seconds, mode, label) {
  return { mode, seconds, label, offsetAt: () => seconds };
}

function browser() {
  let name = "";
  try {
    name = Intl.DateTimeFormat().resolvedOptions().timeZone || "";
  } catch {
    name = "";
  }
  return {
    mode: "browser",
    seconds: null,
    label: `this browser's zone${name ? ` (${name})` : ""}`,
    offsetAt: (t) => -new Date(t).getTimezoneOffset() * 60,
  };
}

// The zone of the user's turns: the offset of their latest turn (a user who travels is shown
// where they wrote from last); null when none of the turns is the user's.
export function userOffset(turns) {
  for (let i = turns.length - 1; i >= 0; i -= 1) {
    if (turns[i].role !== "user") continue;
    const seconds = offsetOf(turns[i].at);
    if (seconds !== null) return seconds;
  }
  return null;
}

// The zone of a fixed UTC offset (a turn's own).
export function offsetZone(seconds) {
  return fixed(seconds, "offset", seconds === 0 ? "UTC" : `UTC${offsetText(seconds)}`);
}

// The zone a user's memory times are read in (the memory list, a memory's page): the API's
// ``user_offset_s``, the offset of their latest turn of role user; UTC when they have none.
export function userZone(seconds) {
  return offsetZone(Number.isFinite(seconds) ? seconds : 0);
}

// The zone a picture is drawn in: ``mode`` is "user" (the user's zone, else this browser's),
// "browser" or "utc".
export function chooseZone(mode, turns) {
  if (mode === "utc") return fixed(0, "utc", "UTC");
  if (mode === "user") {
    const seconds = userOffset(turns);
    if (seconds !== null) return fixed(seconds, "user", `${offsetZone(seconds).label}, the user's zone`);
  }
  return browser();
}

// The wall clock of instant ``t`` (ms) in ``zone``, read with the getUTC… methods.
function wall(t, zone) {
  return new Date(t + zone.offsetAt(t) * SECOND);
}

const pad = (n) => String(n).padStart(2, "0");
const dateOf = (d) => `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`;
const timeOf = (d, seconds) =>
  `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}${seconds ? `:${pad(d.getUTCSeconds())}` : ""}`;

// "2026-10-05 20:03" (with seconds when asked) in ``zone``.
export function stamp(t, zone, { seconds = false } = {}) {
  if (!Number.isFinite(t)) return "—";
  const d = wall(t, zone);
  return `${dateOf(d)} ${timeOf(d, seconds)}`;
}

// The zone's name at instant ``t``: "UTC+08:00", or "UTC".
export function zoneName(t, zone) {
  const seconds = zone.offsetAt(t);
  return seconds === 0 ? "UTC" : `UTC${offsetText(seconds)}`;
}

// An ISO time from the API in ``zone``, or "—".
export function stampIso(iso, zone, options) {
  return iso ? stamp(Date.parse(iso), zone, options) : "—";
}

// The bound of a day picked in a date field ("2026-10-05"), in ``zone``: its first moment, or
// its last second when ``end`` is set; an ISO time with the zone's offset, as the API wants.
export function dayBound(date, end, zone) {
  const clock = end ? "23:59:59" : "00:00:00";
  const guess = Date.parse(`${date}T${clock}Z`);
  const seconds = zone.offsetAt(guess - zone.offsetAt(guess) * SECOND);
  return `${date}T${clock}${offsetText(seconds).replace("−", "-")}`;
}

const STEPS = [
  SECOND, 5 * SECOND, 15 * SECOND, 30 * SECOND,
  MINUTE, 2 * MINUTE, 5 * MINUTE, 10 * MINUTE, 15 * MINUTE, 30 * MINUTE,
  HOUR, 2 * HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR,
  DAY, 2 * DAY, WEEK, 2 * WEEK,
];
const MONTH_STEPS = [1, 2, 3, 6, 12];

// Axis ticks on round times of ``zone`` (whole minutes, hours, local midnights, Mondays, the first
// of a month) over [start, end] (ms), at most ``most`` of them: [{t, label}]. A label says the
// time of day under a day, with the date where the day changes; the date from a day up; the
// month from a month up.
export function zoneTicks(start, end, zone, most = 8) {
  const span = Math.max(1, end - start);
  const step = STEPS.find((s) => span / s <= most);
  if (step === undefined) return monthTicks(start, end, zone, span, most);
  const base = step === WEEK || step === 2 * WEEK ? MONDAY : 0;
  const out = [];
  const off0 = zone.offsetAt(start) * SECOND;
  let local = Math.ceil((start + off0 - base) / step) * step + base;
  let lastDay = "";
  for (; out.length <= most; local += step) {
    const t = local - zone.offsetAt(local - off0) * SECOND;
    if (t > end) break;
    const d = wall(t, zone);
    const day = dateOf(d);
    let label;
    if (step >= DAY) label = day.slice(5);
    else label = day === lastDay ? timeOf(d, step < MINUTE) : `${day.slice(5)} ${timeOf(d, step < MINUTE)}`;
    lastDay = day;
    out.push({ t, label });
  }
  return out;
}

function monthTicks(start, end, zone, span, most) {
  const months = MONTH_STEPS.find((m) => span / (m * 30.4 * DAY) <= most) ?? 12 * Math.ceil(span / (365 * DAY * most));
  const first = wall(start, zone);
  let index = Math.ceil((first.getUTCFullYear() * 12 + first.getUTCMonth()) / months) * months;
  const out = [];
  for (; out.length <= most; index += months) {
    const local = Date.UTC(Math.floor(index / 12), index % 12, 1);
    const t = local - zone.offsetAt(local) * SECOND;
    if (t > end) break;
    if (t >= start) out.push({ t, label: `${Math.floor(index / 12)}-${pad((index % 12) + 1)}` });
  }
  return out;
}
