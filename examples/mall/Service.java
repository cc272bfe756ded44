import java.io.IOException;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Array;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The mall's order service in Java (JDBC, org.postgresql:postgresql): the same calls as
 * service.py. Places orders in the shop's own tables and in ordergate in one transaction, applies
 * payment callbacks through the gate, closes orders for operations.
 *
 * <pre>
 *   java -cp DRIVER_JARS:CLASSES Service place ORDERS_TSV        the orders tagged "java"
 *   java -cp ... Service pay CALLS_TSV [--workers N]              the callbacks tagged "java", on time
 *   java -cp ... Service close ORDER_SN OPERATOR REASON           a manual close
 * </pre>
 *
 * The connection comes from libpq's variables (PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD,
 * PGOPTIONS), read here because the driver does not: a PGHOST that is a socket directory means
 * 127.0.0.1 (the driver speaks TCP). The service needs the privileges of role mall_app (run.sh
 * sets PGOPTIONS="-c role=mall_app", passed as the driver's "options"). Answers go to stdout, one
 * tab-separated line per call, the same columns as service.py's. File formats: race.py. Every
 * value reaches the database as a bound parameter.
 *
 * Lock order (hooks.sql): the gate is called before any row a hook writes is locked. Placing calls
 * ordergate.place_order first, then locks the coupon row and the stock rows by SKU id ascending; a
 * payment calls ordergate.claim_payment first. A serialization failure, deadlock, lock or statement
 * timeout (40001, 40P01, 55P03, 57014) rolls the whole shop transaction back and runs it again.
 */
public final class Service {
    static final String SERVICE = "java";
    static final String APP_NAME = "mall-service-java";
    static final int CANCEL_WAIT_MS = 30_000;
    static final AtomicInteger retries = new AtomicInteger();
    static final AtomicInteger deadlocks = new AtomicInteger();

    /** What a transaction decided: commit or roll back, and the answer. */
    record Result<T>(boolean commit, T value) {}

    interface Tx<T> {
        Result<T> run(Connection c) throws SQLException;
    }

    record Line(long sku, int qty, BigDecimal price, String code) {}

    record Call(String kind, String orderSn, long deltaMs, String txnNo, long amountDelta,
                String channel) {}

    record Due(long dueMs, int seq, Call call, long amount) {}

    static Connection connect() throws SQLException {
        Map<String, String> env = System.getenv();
        String host = env.getOrDefault("PGHOST", "");
        if (host.isEmpty() || host.startsWith("/")) host = "127.0.0.1";
        String port = env.getOrDefault("PGPORT", "5432");
        String user = env.getOrDefault("PGUSER", System.getProperty("user.name"));
        String db = env.getOrDefault("PGDATABASE", user);
        Properties p = new Properties();
        p.setProperty("user", user);
        if (env.containsKey("PGPASSWORD")) p.setProperty("password", env.get("PGPASSWORD"));
        if (env.containsKey("PGOPTIONS")) p.setProperty("options", env.get("PGOPTIONS"));
        p.setProperty("ApplicationName", APP_NAME);
        Connection c = DriverManager.getConnection("jdbc:postgresql://" + host + ":" + port + "/"
                + URLEncoder.encode(db, StandardCharsets.UTF_8), p);
        c.setAutoCommit(false);
        return c;
    }

    /** Runs tx in one transaction; a transient failure rolls it back and runs it again. */
    static <T> T inTransaction(Connection c, Tx<T> tx) throws SQLException {
        for (int attempt = 0; ; attempt++) {
            try {
                Result<T> r = tx.run(c);
                if (r.commit()) c.commit(); else c.rollback();
                return r.value();
            } catch (SQLException e) {
                c.rollback();
                String state = e.getSQLState();
                // Retriable on the same connection (docs/integrate.md, "Errors"); a lost
                // connection would need a new one and fails the example instead.
                boolean transient_ = "40001".equals(state) || "40P01".equals(state)
                        || "55P03".equals(state) || "57014".equals(state);
                if (!transient_ || attempt == 4) throw e;
                retries.incrementAndGet();
                if ("40P01".equals(state)) deadlocks.incrementAndGet();
                System.err.println(SERVICE + ": " + state + ", transaction retried: " + e.getMessage());
                try {
                    Thread.sleep(10L * (attempt + 1));
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    throw e;
                }
            }
        }
    }

    /** One order: the gate's gate-only order first, then the shop's rows: the coupon used, the
     *  stock locked, oms_order and its items. Rolled back whole unless everything is there. */
    static Result<String> placeTx(Connection c, String orderSn, long member, long couponId,
                                  TreeMap<Long, Integer> items, int deadlineMs) throws SQLException {
        Map<Long, Line> catalogue = new HashMap<>();
        try (PreparedStatement ps = c.prepareStatement(
                "SELECT id, price, sku_code FROM mall.pms_sku_stock WHERE id = ANY (?)")) {
            ps.setArray(1, c.createArrayOf("bigint", items.keySet().toArray()));
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    long sku = rs.getLong(1);
                    catalogue.put(sku, new Line(sku, items.get(sku), rs.getBigDecimal(2), rs.getString(3)));
                }
            }
        }
        if (catalogue.size() != items.size()) return new Result<>(false, "out_of_stock");  // an unknown SKU
        BigDecimal total = BigDecimal.ZERO;
        for (Line l : catalogue.values()) total = total.add(l.price().multiply(BigDecimal.valueOf(l.qty())));
        BigDecimal couponAmount = new BigDecimal("0.00");
        if (couponId != 0) {
            try (PreparedStatement ps = c.prepareStatement("SELECT amount, min_point FROM mall.sms_coupon WHERE id = ?")) {
                ps.setLong(1, couponId);
                try (ResultSet rs = ps.executeQuery()) {
                    if (!rs.next() || total.compareTo(rs.getBigDecimal(2)) < 0)
                        return new Result<>(false, "coupon_unavailable");
                    couponAmount = rs.getBigDecimal(1).min(total.subtract(new BigDecimal("0.01")));
                }
            }
        }
        BigDecimal pay = total.subtract(couponAmount);

        // The gate before any row a hook writes (hooks.sql, lock order). Gate-only: no items, no
        // coupon in ordergate; the hooks keep the shop's stock and coupon in step with what
        // ordergate decides. A repeated order_sn is 'duplicate' here, before any stock moved.
        try (PreparedStatement ps = c.prepareStatement(
                "SELECT ordergate.place_order(?, ?, '[]'::jsonb, NULL, now() + ? * interval '1 millisecond')")) {
            ps.setString(1, orderSn);
            ps.setLong(2, pay.movePointRight(2).longValueExact());
            ps.setInt(3, deadlineMs);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                String outcome = rs.getString(1);
                if (!"placed".equals(outcome)) return new Result<>(false, outcome);
            }
        }

        // Then the hooks' order: the coupon row, the stock rows by SKU id ascending.
        Long historyId = null;
        if (couponId != 0) {
            try (PreparedStatement ps = c.prepareStatement(
                    "SELECT id FROM mall.sms_coupon_history"
                    + " WHERE member_id = ? AND coupon_id = ? AND use_status = 0"
                    + " ORDER BY id LIMIT 1 FOR UPDATE")) {
                ps.setLong(1, member);
                ps.setLong(2, couponId);
                try (ResultSet rs = ps.executeQuery()) {
                    if (!rs.next()) return new Result<>(false, "coupon_unavailable");
                    historyId = rs.getLong(1);
                }
            }
        }
        try (PreparedStatement ps = c.prepareStatement(
                "UPDATE mall.pms_sku_stock SET lock_stock = lock_stock + ?"
                + " WHERE id = ? AND stock - lock_stock >= ? RETURNING price")) {
            for (Map.Entry<Long, Integer> it : items.entrySet()) {   // sorted by SKU id
                ps.setInt(1, it.getValue());
                ps.setLong(2, it.getKey());
                ps.setInt(3, it.getValue());
                try (ResultSet rs = ps.executeQuery()) {
                    if (!rs.next()) return new Result<>(false, "out_of_stock");
                    if (rs.getBigDecimal(1).compareTo(catalogue.get(it.getKey()).price()) != 0)
                        return new Result<>(false, "price_changed");   // the gate's amount is stale
                }
            }
        }
        long orderId;
        try (PreparedStatement ps = c.prepareStatement(
                "INSERT INTO mall.oms_order (member_id, coupon_id, order_sn, member_username,"
                + "       total_amount, pay_amount, coupon_amount, source_type, receiver_name,"
                + "       receiver_phone, receiver_detail_address)"
                + " VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?) RETURNING id")) {
            ps.setLong(1, member);
            if (couponId != 0) ps.setLong(2, couponId); else ps.setNull(2, java.sql.Types.BIGINT);
            ps.setString(3, orderSn);
            ps.setString(4, "member" + member);
            ps.setBigDecimal(5, total);
            ps.setBigDecimal(6, pay);
            ps.setBigDecimal(7, couponAmount);
            ps.setString(8, "member " + member);
            ps.setString(9, "18000000000");
            ps.setString(10, "1 Example Road");
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                orderId = rs.getLong(1);
            }
        }
        try (PreparedStatement ps = c.prepareStatement(
                "INSERT INTO mall.oms_order_item (order_id, order_sn, product_name, product_price,"
                + "       product_quantity, product_sku_id, product_sku_code, coupon_amount, real_amount)"
                + " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")) {
            for (Long sku : items.keySet()) {
                Line l = catalogue.get(sku);
                BigDecimal gross = l.price().multiply(BigDecimal.valueOf(l.qty()));
                BigDecimal share = couponAmount.multiply(gross).divide(total, 2, RoundingMode.HALF_EVEN);
                ps.setLong(1, orderId);
                ps.setString(2, orderSn);
                ps.setString(3, l.code());
                ps.setBigDecimal(4, l.price());
                ps.setInt(5, l.qty());
                ps.setLong(6, l.sku());
                ps.setString(7, l.code());
                ps.setBigDecimal(8, share);
                ps.setBigDecimal(9, gross.subtract(share));
                ps.executeUpdate();
            }
        }
        if (historyId != null) {
            try (PreparedStatement ps = c.prepareStatement(
                    "UPDATE mall.sms_coupon_history"
                    + "   SET use_status = 1, use_time = now(), order_id = ?, order_sn = ? WHERE id = ?")) {
                ps.setLong(1, orderId);
                ps.setString(2, orderSn);
                ps.setLong(3, historyId);
                ps.executeUpdate();
            }
        }
        return new Result<>(true, "placed");
    }

    /** A payment callback: the gate decides; on 'paid' its hook already made the shop's order
     *  paid and its stock sold in this transaction, and the service records the pay type. */
    static Result<String[]> payTx(Connection c, String orderSn, String txnNo, long cents, String channel)
            throws SQLException {
        String outcome, first;
        try (PreparedStatement ps = c.prepareStatement(
                "SELECT outcome, status, first_outcome FROM ordergate.claim_payment(?, ?, ?, ?)")) {
            ps.setString(1, orderSn);
            ps.setString(2, txnNo);
            ps.setLong(3, cents);
            ps.setString(4, channel);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                outcome = rs.getString(1);
                first = rs.getString(3);
            }
        }
        if ("paid".equals(outcome)) {
            try (PreparedStatement ps = c.prepareStatement(
                    "UPDATE mall.oms_order SET pay_type = ?, modify_time = now()"
                    + " WHERE order_sn = ? AND status = 1")) {
                ps.setInt(1, "alipay".equals(channel) ? 1 : "wechat".equals(channel) ? 2 : 0);
                ps.setString(2, orderSn);
                if (ps.executeUpdate() != 1)
                    throw new SQLException("order " + orderSn + ": the gate answered paid but oms_order is not paid");
            }
        }
        return new Result<>(true, new String[] {outcome, first});
    }

    static Result<String> closeTx(Connection c, String orderSn, String operator, String reason)
            throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(
                "SELECT outcome, status FROM ordergate.close_order(?, ?, ?)")) {
            ps.setString(1, orderSn);
            ps.setString(2, operator);
            ps.setString(3, reason);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return new Result<>(true, rs.getString(1));
            }
        }
    }

    static synchronized void answer(String action, String orderSn, String txnNo, Long amount,
                                    String outcome, String first) {
        String[] f = {SERVICE, action, orderSn, txnNo, amount == null ? null : amount.toString(), outcome, first};
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < f.length; i++) {
            if (i > 0) sb.append('\t');
            sb.append(f[i] == null ? "\\N" : f[i]);
        }
        System.out.println(sb);
        System.out.flush();
    }

    static List<String[]> tsvLines(String path) throws IOException {
        List<String[]> out = new ArrayList<>();
        for (String line : Files.readAllLines(Path.of(path))) {
            String[] f = line.split("\t", -1);
            if (f.length > 1 && f[0].equals(SERVICE)) out.add(f);
        }
        return out;
    }

    static int place(String path) throws IOException, SQLException, InterruptedException {
        List<String[]> orders = tsvLines(path);
        long start = System.nanoTime() / 1_000_000;
        try (Connection c = connect()) {
            for (String[] o : orders) {
                long pause = start + Long.parseLong(o[6]) - System.nanoTime() / 1_000_000;
                if (pause > 0) Thread.sleep(pause);
                TreeMap<Long, Integer> items = new TreeMap<>();
                for (String it : o[5].split(",")) {
                    String[] kv = it.split(":");
                    items.merge(Long.parseLong(kv[0]), Integer.parseInt(kv[1]), Integer::sum);
                }
                String outcome = inTransaction(c, x -> placeTx(x, o[1], Long.parseLong(o[2]),
                        Long.parseLong(o[3]), items, Integer.parseInt(o[4])));
                answer("place", o[1], null, null, outcome, null);
            }
        }
        return orders.size();
    }

    /** order_sn -> {pay amount in cents, ms until its expire_at by the database's clock}. */
    static Map<String, long[]> loadOrders(Connection c, List<String> sns) throws SQLException {
        Map<String, long[]> m = new HashMap<>();
        try (PreparedStatement ps = c.prepareStatement(
                "SELECT o.order_sn, (o.pay_amount * 100)::bigint,"
                + "       (extract(epoch FROM g.expire_at - now()) * 1000)::bigint"
                + "  FROM mall.oms_order o JOIN ordergate.orders g ON g.order_no = o.order_sn"
                + " WHERE o.order_sn = ANY (?)")) {
            Array arr = c.createArrayOf("text", sns.toArray());
            ps.setArray(1, arr);
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) m.put(rs.getString(1), new long[] {rs.getLong(2), rs.getLong(3)});
            }
        }
        c.rollback();
        return m;
    }

    static boolean waitCancelled(Connection c, String orderSn) throws SQLException, InterruptedException {
        long deadline = System.nanoTime() / 1_000_000 + CANCEL_WAIT_MS;
        try (PreparedStatement ps = c.prepareStatement("SELECT status FROM ordergate.orders WHERE order_no = ?")) {
            ps.setString(1, orderSn);
            while (System.nanoTime() / 1_000_000 < deadline) {
                String st = null;
                try (ResultSet rs = ps.executeQuery()) {
                    if (rs.next()) st = rs.getString(1);
                }
                c.rollback();
                if ("cancelled".equals(st)) return true;
                if ("paid".equals(st)) return false;
                Thread.sleep(100);
            }
        }
        throw new SQLException("order " + orderSn + ": not cancelled within " + CANCEL_WAIT_MS / 1000 + " s");
    }

    static void handle(Connection c, Call call, long amount) throws SQLException, InterruptedException {
        if (call.kind().equals("close")) {
            String outcome = inTransaction(c, x -> closeTx(x, call.orderSn(), "ops-" + SERVICE, "customer asked to cancel"));
            answer("close", call.orderSn(), null, null, outcome, null);
            return;
        }
        if (call.kind().equals("after_cancel") && !waitCancelled(c, call.orderSn())) {
            answer("skip", call.orderSn(), call.txnNo(), null, "paid_meanwhile", null);
            return;
        }
        long cents = amount + call.amountDelta();
        String[] r = inTransaction(c, x -> payTx(x, call.orderSn(), call.txnNo(), cents, call.channel()));
        answer("pay", call.orderSn(), call.txnNo(), cents, r[0], r[1]);
        if (call.kind().equals("pay_twice") && "paid".equals(r[0])) {
            String t2 = call.txnNo() + "-2";
            r = inTransaction(c, x -> payTx(x, call.orderSn(), t2, cents, call.channel()));
            answer("pay", call.orderSn(), t2, cents, r[0], r[1]);
        }
    }

    static int pay(String path, int workers) throws Exception {
        List<Call> calls = new ArrayList<>();
        for (String[] f : tsvLines(path))
            calls.add(new Call(f[1], f[2], Long.parseLong(f[3]), f[4], Long.parseLong(f[5]), f[6]));
        long start = System.nanoTime() / 1_000_000;
        Map<String, long[]> known;
        try (Connection c = connect()) {
            List<String> sns = new ArrayList<>();
            for (Call call : calls) sns.add(call.orderSn());
            known = loadOrders(c, sns);
        }
        List<Due> queue = new ArrayList<>();
        for (int seq = 0; seq < calls.size(); seq++) {
            Call call = calls.get(seq);
            if (call.kind().equals("unknown")) {
                queue.add(new Due(0, seq, call, 100));
            } else if (!known.containsKey(call.orderSn())) {
                answer("skip", call.orderSn(), call.txnNo().isEmpty() ? null : call.txnNo(), null, "not_placed", null);
            } else {
                long[] k = known.get(call.orderSn());
                long due = call.kind().equals("mismatch") ? 0 : k[1] + call.deltaMs();
                queue.add(new Due(due, seq, call, k[0]));
            }
        }
        queue.sort((a, b) -> a.dueMs() != b.dueMs() ? Long.compare(a.dueMs(), b.dueMs()) : Integer.compare(a.seq(), b.seq()));
        List<Exception> errors = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        for (int w = 0; w < workers; w++) {
            Thread t = new Thread(() -> {
                try (Connection c = connect()) {
                    while (true) {
                        Due d;
                        synchronized (queue) {
                            if (queue.isEmpty()) break;
                            d = queue.remove(0);
                        }
                        long pause = start + d.dueMs() - System.nanoTime() / 1_000_000;
                        if (pause > 0) Thread.sleep(pause);
                        handle(c, d.call(), d.amount());
                    }
                } catch (Exception e) {
                    synchronized (errors) {
                        errors.add(e);
                    }
                }
            });
            threads.add(t);
            t.start();
        }
        for (Thread t : threads) t.join();
        if (!errors.isEmpty()) throw errors.get(0);
        return calls.size();
    }

    static int usage() {
        System.err.println("usage: Service place ORDERS_TSV | pay CALLS_TSV [--workers N] | close ORDER_SN OPERATOR REASON");
        return 2;
    }

    static int run(String[] a) throws Exception {
        int n;
        if (a.length == 2 && a[0].equals("place")) {
            n = place(a[1]);
        } else if ((a.length == 2 || a.length == 4) && a[0].equals("pay")) {
            int workers = 4;
            if (a.length == 4) {
                if (!a[2].equals("--workers") || !a[3].matches("[0-9]{1,2}") || Integer.parseInt(a[3]) < 1) return usage();
                workers = Integer.parseInt(a[3]);
            }
            n = pay(a[1], workers);
        } else if (a.length == 4 && a[0].equals("close")) {
            try (Connection c = connect()) {
                String outcome = inTransaction(c, x -> closeTx(x, a[1], a[2], a[3]));
                answer("close", a[1], null, null, outcome, null);
            }
            return 0;
        } else {
            return usage();
        }
        System.err.printf("Service %s: %d lines, %d transactions retried (%d deadlocks)%n",
                a[0], n, retries.get(), deadlocks.get());
        return 0;
    }

    public static void main(String[] args) throws Exception {
        System.exit(run(args));
    }
}
