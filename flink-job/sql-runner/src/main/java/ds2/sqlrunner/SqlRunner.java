package ds2.sqlrunner;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.StatementSet;
import org.apache.flink.table.api.TableEnvironment;

/**
 * Submits a Flink SQL script as one job, as Flink's SQL client would: {@code SET 'key' = 'value'}
 * statements go into the job's configuration, DDL runs in order, and every {@code INSERT} joins one
 * statement set. The job's operators are the planner's; nothing here is specific to a query.
 *
 * <p>Why a runner: this distribution (PyPI's apache-flink wheels) ships the SQL client without the
 * SQL gateway it embeds, so {@code sql-client.sh} cannot start. Submitting through the REST API's
 * jar-run also lets a restart restore from a savepoint like any other job. The Flink Kubernetes
 * Operator runs SQL the same way (its flink-sql-runner example).
 *
 * <p>Arguments: {@code --sql <statements>} (the script's text) or {@code --file <path>} (read by the
 * JobManager).
 */
public final class SqlRunner {
    private static final Pattern SET = Pattern.compile("(?is)SET\\s+'([^']+)'\\s*=\\s*'((?:[^']|'')*)'");

    private SqlRunner() {}

    public static void main(String[] args) throws Exception {
        String script = readScript(args);
        TableEnvironment tables = TableEnvironment.create(EnvironmentSettings.inStreamingMode());
        StatementSet inserts = tables.createStatementSet();
        int insertCount = 0;
        for (String statement : split(script)) {
            Matcher set = SET.matcher(statement);
            if (set.matches()) {
                tables.getConfig().getConfiguration().setString(set.group(1), set.group(2).replace("''", "'"));
            } else if (statement.regionMatches(true, 0, "INSERT", 0, 6)) {
                inserts.addInsertSql(statement);
                insertCount++;
            } else {
                tables.executeSql(statement);
            }
        }
        if (insertCount == 0) {
            throw new IllegalArgumentException("the SQL script has no INSERT statement: nothing to run");
        }
        inserts.execute();
    }

    private static String readScript(String[] args) throws Exception {
        if (args.length == 2 && args[0].equals("--sql")) {
            return args[1];
        }
        if (args.length == 2 && args[0].equals("--file")) {
            return Files.readString(Path.of(args[1]), StandardCharsets.UTF_8);
        }
        throw new IllegalArgumentException("usage: SqlRunner --sql <statements> | --file <path>");
    }

    /** Statements separated by ';', outside quotes and outside '--' comments (which are dropped). */
    static List<String> split(String script) {
        List<String> statements = new ArrayList<>();
        StringBuilder current = new StringBuilder();
        boolean quoted = false;
        for (int i = 0; i < script.length(); i++) {
            char c = script.charAt(i);
            if (!quoted && c == '-' && i + 1 < script.length() && script.charAt(i + 1) == '-') {
                while (i < script.length() && script.charAt(i) != '\n') {
                    i++;
                }
                current.append('\n');
                continue;
            }
            if (c == '\'') {
                quoted = !quoted;
            }
            if (c == ';' && !quoted) {
                add(statements, current);
            } else {
                current.append(c);
            }
        }
        add(statements, current);
        return statements;
    }

    private static void add(List<String> statements, StringBuilder current) {
        String statement = current.toString().strip();
        if (!statement.isEmpty()) {
            statements.add(statement);
        }
        current.setLength(0);
    }
}
