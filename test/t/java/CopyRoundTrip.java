/*
 * CopyRoundTrip -- a pgjdbc (JSSE) client for test/t/021_other_clients.pl.
 *
 * Usage: java -cp postgresql.jar:DIR CopyRoundTrip URL ROWS_OUT ROWS_IN FILLER [PARAM]
 *
 * Connects with URL (the test passes sslmode=require and a non-validating
 * SSL factory; the TLS version is chosen with -Djdk.tls.client.protocols),
 * then:
 *   - COPY OUT of "SELECT i, md5(i::text) || repeat('x', FILLER) FROM
 *     generate_series(1, ROWS_OUT) i", digested as it arrives;
 *   - COPY IN to table copy_in(i int, s text) of ROWS_IN generated rows
 *     "i<TAB>md5('r' || i) || FILLER times 'y'";
 *   - with PARAM > 0, "SELECT length($1)" with a text of PARAM bytes (one
 *     Bind message that large);
 *   - its own row of ssl_renegotiate_activity, as JSON.
 * and prints one "key=value" line per fact, flushed as it goes, so that the
 * test sees how far it got when the server ends the connection:
 *   pid, tls_version, cipher, out_bytes, out_md5, out_error, out_sqlstate,
 *   in_bytes, in_md5, in_rows, in_error, in_sqlstate, param_length,
 *   param_error, param_sqlstate, activity, activity_error, done.
 * Exit status 0 when every step worked, 1 otherwise.
 */
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.Arrays;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;

import org.postgresql.PGConnection;
import org.postgresql.copy.CopyManager;

public class CopyRoundTrip
{
	private static void say(String key, Object value)
	{
		System.out.println(key + "=" + String.valueOf(value).replace('\n', ' '));
		System.out.flush();
	}

	private static final byte[] HEX = "0123456789abcdef".getBytes(StandardCharsets.US_ASCII);

	/* lower-case hex of b into out at off */
	private static void hexInto(byte[] b, byte[] out, int off)
	{
		for (int i = 0; i < b.length; i++)
		{
			out[off + 2 * i] = HEX[(b[i] >> 4) & 0xf];
			out[off + 2 * i + 1] = HEX[b[i] & 0xf];
		}
	}

	private static String hex(byte[] b)
	{
		byte[] out = new byte[b.length * 2];
		hexInto(b, out, 0);
		return new String(out, StandardCharsets.US_ASCII);
	}

	/* the message of an exception and of its causes */
	private static String describe(Throwable t)
	{
		StringBuilder sb = new StringBuilder();
		for (Throwable c = t; c != null; c = c.getCause())
		{
			if (sb.length() > 0)
				sb.append(" <- ");
			sb.append(c.getClass().getName()).append(": ").append(c.getMessage());
			if (c.getCause() == c)
				break;
		}
		return sb.toString();
	}

	/* The SQLSTATE of the first SQLException in the chain, or "none". */
	private static String sqlState(Throwable t)
	{
		for (Throwable c = t; c != null; c = c.getCause())
		{
			if (c instanceof SQLException && ((SQLException) c).getSQLState() != null)
				return ((SQLException) c).getSQLState();
			if (c.getCause() == c)
				break;
		}
		return "none";
	}

	/* An OutputStream that digests and counts what COPY OUT writes. */
	private static final class DigestSink extends OutputStream
	{
		final MessageDigest md;
		long bytes = 0;

		DigestSink() throws Exception
		{
			md = MessageDigest.getInstance("MD5");
		}

		@Override
		public void write(int b)
		{
			md.update((byte) b);
			bytes++;
		}

		@Override
		public void write(byte[] b, int off, int len)
		{
			md.update(b, off, len);
			bytes += len;
		}
	}

	/* An InputStream that generates the COPY IN rows, digesting them. */
	private static final class RowSource extends InputStream
	{
		final int rows;
		final int fillerLen;
		final MessageDigest md;
		final MessageDigest rowMd;
		final byte[] line;
		int next = 1;
		int len = 0;
		int pos = 0;
		long bytes = 0;

		RowSource(int rows, int fillerLen) throws Exception
		{
			this.rows = rows;
			this.fillerLen = fillerLen;
			md = MessageDigest.getInstance("MD5");
			rowMd = MessageDigest.getInstance("MD5");
			line = new byte[12 + 32 + fillerLen + 1];
		}

		/* make row "next" current when the previous one is used up */
		private boolean fill()
		{
			if (pos < len)
				return true;
			if (next > rows)
				return false;
			byte[] num = Integer.toString(next).getBytes(StandardCharsets.US_ASCII);
			byte[] key = ("r" + next).getBytes(StandardCharsets.US_ASCII);
			int n = 0;
			System.arraycopy(num, 0, line, 0, num.length);
			n += num.length;
			line[n++] = '\t';
			hexInto(rowMd.digest(key), line, n);
			n += 32;
			for (int i = 0; i < fillerLen; i++)
				line[n++] = 'y';
			line[n++] = '\n';
			len = n;
			pos = 0;
			md.update(line, 0, len);
			bytes += len;
			next++;
			return true;
		}

		@Override
		public int read()
		{
			if (!fill())
				return -1;
			return line[pos++] & 0xff;
		}

		@Override
		public int read(byte[] b, int off, int want)
		{
			if (want == 0)
				return 0;
			int n = 0;
			while (n < want && fill())
			{
				int k = Math.min(want - n, len - pos);
				System.arraycopy(line, pos, b, off + n, k);
				pos += k;
				n += k;
			}
			return n == 0 ? -1 : n;
		}
	}

	public static void main(String[] args) throws Exception
	{
		if (args.length != 4 && args.length != 5)
		{
			System.err.println("usage: CopyRoundTrip URL ROWS_OUT ROWS_IN FILLER [PARAM]");
			System.exit(2);
		}
		String url = args[0];
		int rowsOut = Integer.parseInt(args[1]);
		int rowsIn = Integer.parseInt(args[2]);
		int filler = Integer.parseInt(args[3]);
		int paramBytes = args.length == 5 ? Integer.parseInt(args[4]) : 0;
		boolean ok = true;

		try (Connection conn = DriverManager.getConnection(url))
		{
			try (Statement st = conn.createStatement();
				 ResultSet rs = st.executeQuery(
					 "SELECT pg_backend_pid(), version, cipher FROM pg_stat_ssl WHERE pid = pg_backend_pid()"))
			{
				rs.next();
				say("pid", rs.getInt(1));
				say("tls_version", rs.getString(2));
				say("cipher", rs.getString(3));
			}

			CopyManager copy = conn.unwrap(PGConnection.class).getCopyAPI();

			if (rowsOut > 0)
			{
				DigestSink sink = new DigestSink();
				try
				{
					copy.copyOut("COPY (SELECT i, md5(i::text) || repeat('x', " + filler
								 + ") FROM generate_series(1, " + rowsOut + ") i) TO STDOUT",
								 sink);
				}
				catch (Exception e)
				{
					ok = false;
					say("out_error", describe(e));
					say("out_sqlstate", sqlState(e));
				}
				say("out_bytes", sink.bytes);
				say("out_md5", hex(sink.md.digest()));
			}

			if (ok && rowsIn > 0)
			{
				RowSource src = new RowSource(rowsIn, filler);
				try
				{
					long n = copy.copyIn("COPY copy_in FROM STDIN", src);
					say("in_rows", n);
				}
				catch (Exception e)
				{
					ok = false;
					say("in_error", describe(e));
					say("in_sqlstate", sqlState(e));
				}
				say("in_bytes", src.bytes);
				say("in_md5", hex(src.md.digest()));
			}

			if (ok && paramBytes > 0)
			{
				char[] text = new char[paramBytes];

				Arrays.fill(text, 'p');
				try (PreparedStatement ps = conn.prepareStatement("SELECT length(?)"))
				{
					ps.setString(1, new String(text));
					try (ResultSet rs = ps.executeQuery())
					{
						rs.next();
						say("param_length", rs.getInt(1));
					}
				}
				catch (Exception e)
				{
					ok = false;
					say("param_error", describe(e));
					say("param_sqlstate", sqlState(e));
				}
			}

			if (ok)
			{
				try (Statement st = conn.createStatement();
					 ResultSet rs = st.executeQuery(
						 "SELECT row_to_json(a) FROM ssl_renegotiate_activity a WHERE pid = pg_backend_pid()"))
				{
					if (rs.next())
						say("activity", rs.getString(1));
				}
				catch (Exception e)
				{
					ok = false;
					say("activity_error", describe(e));
				}
			}
		}
		catch (Exception e)
		{
			ok = false;
			say("error", describe(e));
		}
		say("done", ok ? "ok" : "failed");
		System.exit(ok ? 0 : 1);
	}
}
