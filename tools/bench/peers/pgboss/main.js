// og_peer_pgboss: the same cancels as ordergate-consumer, claimed through pg-boss on the same
// database, for a side-by-side lateness and drain measurement (tools/bench/peers/README.md). It
// speaks the peers' protocol, the one og_peer_river speaks: the orders named by -prefix
// (ordergate.orders, order_no LIKE prefix || '%', still pending_payment), "event=loaded" once it
// has them, then each order's job inserted at its expire_at (or, with -burst, every job inserted
// first and the workers started at -start-at), claimed through ordergate.claim_cancel, the gate
// SQL the consumer calls, and "event=done orders=N seconds=S" once every one of them came back
// cancelled (counted from the claims' own outcomes: no query polls the database). It owns only
// its own schema (pgboss, pg-boss's tables); it writes to ordergate only through claim_cancel.
//
// Shapes: -mode coalesced (default): each worker fetches up to -batch jobs (500) in one call and
// claims their orders in one claim_cancel call, pg-boss's batch handler; -mode single: one job
// per fetch and per claim_cancel call, as pg-boss documents a worker, with -workers workers.
'use strict'

const PgBoss = require('pg-boss')
const pg = require('pg')

const QUEUE = 'ordergate_cancel'
const CLAIM_SQL =
  "SELECT count(*) FILTER (WHERE outcome = 'cancelled')::int AS won, " +
  "       count(*) FILTER (WHERE outcome IN ('busy', 'not_due'))::int AS again " +
  "FROM ordergate.claim_cancel($1::text[], 'timeout_consumer')"

function log (line) {
  const t = new Date().toISOString()
  process.stdout.write(`${t} ${line}\n`)
}

function die (msg) {
  log(`event=error ${msg}`)
  process.exit(1)
}

// -name value pairs and -flag switches, as Go's flag package takes them.
function parseArgs (argv) {
  const o = {
    prefix: 'r',
    mode: 'coalesced',
    burst: false,
    startAt: 0,
    timeoutS: 600,
    workers: 0,
    batch: 500,
    pollS: 0.5,
    poolMax: 10
  }
  const num = (name, v) => {
    const n = Number(v)
    if (v === undefined || !Number.isFinite(n)) die(`-${name} takes a number, not ${v}`)
    return n
  }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i].replace(/^--?/, '')
    switch (a) {
      case 'prefix': o.prefix = argv[++i]; break
      case 'mode': o.mode = argv[++i]; break
      case 'burst': o.burst = true; break
      case 'start-at': o.startAt = num(a, argv[++i]); break
      case 'timeout': o.timeoutS = num(a, argv[++i]); break
      case 'workers': o.workers = num(a, argv[++i]); break
      case 'batch': o.batch = num(a, argv[++i]); break
      case 'poll-seconds': o.pollS = num(a, argv[++i]); break
      case 'pool': o.poolMax = num(a, argv[++i]); break
      default: die(`unknown argument ${argv[i]}`)
    }
  }
  if (o.mode !== 'coalesced' && o.mode !== 'single') die(`unknown mode ${o.mode}`)
  if (!/^[A-Za-z0-9]+$/.test(o.prefix || '')) die('-prefix takes letters and digits')
  if (o.batch < 1 || o.batch > 10000) die('-batch takes 1 to 10000')
  if (o.mode === 'single') o.batch = 1
  // coalesced: one worker, one claim call in flight at most (one database session for the gate,
  // as one consumer); single: as many workers as the pool has sessions, each one job at a time.
  if (o.workers <= 0) o.workers = o.mode === 'single' ? o.poolMax : 1
  return o
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

async function main () {
  const o = parseArgs(process.argv.slice(2))
  // The connection comes from the PG* environment, as for psql.
  const pool = new pg.Pool({ max: o.poolMax, application_name: 'og-peer-pgboss' })
  const boss = new PgBoss({
    schema: 'pgboss',
    max: o.poolMax,
    application_name: 'og-peer-pgboss-queue',
    schedule: false, // no cron jobs here: no timekeeper polling beside the workers
    pollingIntervalSeconds: o.pollS
  })
  boss.on('error', err => log(`event=pgboss_error ${String(err.message || err).replace(/\s+/g, ' ')}`))

  const { rows } = await pool.query(
    'SELECT order_no, ceil(extract(epoch FROM expire_at) * 1000)::float8 AS at ' +
      'FROM ordergate.orders WHERE order_no LIKE $1 || \'%\' AND status = \'pending_payment\' ' +
      'ORDER BY expire_at, order_no', [o.prefix])
  const dues = rows.map(r => ({ no: r.order_no, at: r.at }))
  await boss.start()
  if (!(await boss.getQueue(QUEUE))) await boss.createQueue(QUEUE)
  log(`event=loaded orders=${dues.length} mode=${o.mode} burst=${o.burst} workers=${o.workers} ` +
    `batch=${o.batch} poll_s=${o.pollS}`)

  let won = 0
  let claims = 0
  let again = 0
  let finish
  const finished = new Promise(resolve => { finish = resolve })
  if (dues.length === 0) finish()
  const ids = []
  let nextWake = 0
  // Wakes as many workers as there are new jobs (round robin): waking every worker for every
  // insert would have them all fetch back to back, one job each, a busy poll that fills the pool.
  const wake = jobs => {
    for (let i = 0; i < Math.min(jobs, ids.length); i++) {
      boss.notifyWorker(ids[nextWake++ % ids.length])
    }
  }

  // pg-boss's batch handler: every job of the fetch in one claim_cancel call. An order that came
  // back busy or not_due is not cancelled: the handler fails, pg-boss retries the batch's jobs
  // (the cancelled ones then come back already_cancelled).
  const handler = async (self, jobs) => {
    const r = await pool.query(CLAIM_SQL, [jobs.map(j => j.data.o)])
    claims++
    won += r.rows[0].won
    if (won >= dues.length) finish()
    // A full fetch says more jobs may wait: this worker fetches again at once instead of one
    // fetch per polling interval (an empty fetch then sends it back to polling).
    if (jobs.length === o.batch) boss.notifyWorker(self.id)
    if (r.rows[0].again > 0) {
      again += r.rows[0].again
      throw new Error(`${r.rows[0].again} orders busy or not due`)
    }
  }
  const startWorkers = async () => {
    for (let i = 0; i < o.workers; i++) {
      const self = {}
      self.id = await boss.work(QUEUE, { batchSize: o.batch, pollingIntervalSeconds: o.pollS },
        jobs => handler(self, jobs))
      ids.push(self.id)
    }
  }
  const insert = async batch => {
    for (let i = 0; i < batch.length; i += 5000) {
      await boss.insert(batch.slice(i, i + 5000).map(d => ({ name: QUEUE, data: { o: d.no } })))
    }
    // The inserting process wakes its own workers (pg-boss has no cross-process wake-up).
    wake(batch.length)
  }

  let start = Date.now()
  if (o.burst) {
    await insert(dues)
    log(`event=inserted jobs=${dues.length}`)
    if (o.startAt > 0) {
      if (Date.now() > o.startAt) die(`inserting ended ${Date.now() - o.startAt} ms past -start-at`)
      await sleep(o.startAt - Date.now())
      start = o.startAt
    } else {
      start = Date.now()
    }
    await startWorkers()
  } else {
    await startWorkers()
    // At each due time, the jobs due by then: one insert per millisecond at most.
    ;(async () => {
      let i = 0
      while (i < dues.length) {
        const wait = dues[i].at - Date.now()
        if (wait > 0) await sleep(wait)
        const now = Date.now()
        let j = i
        while (j < dues.length && dues[j].at <= now) j++
        await insert(dues.slice(i, j))
        i = j
      }
    })().catch(err => die(`insert: ${err.message}`))
  }
  const timer = setTimeout(() => {
    log(`event=timeout left=${dues.length - won}`)
    process.exit(1)
  }, o.timeoutS * 1000)
  await finished
  clearTimeout(timer)
  const seconds = (Date.now() - start) / 1000
  log(`event=done orders=${dues.length} seconds=${seconds.toFixed(3)} claims=${claims} ` +
    `busy_or_not_due=${again}`)
  await boss.stop({ graceful: false, wait: true, timeout: 5000 }).catch(() => {})
  await pool.end()
  process.exit(0)
}

main().catch(err => die(String(err.stack || err).replace(/\s+/g, ' ')))
