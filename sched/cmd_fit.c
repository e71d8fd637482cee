/*
 * cmd_fit.c - `kvconductor fit`: the prefill model's coefficients from
 * measured (tokens, cached, seconds) rows, written as a config file that
 * replay and the daemon read with --config.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "sched/cli.h"
#include "src/common/cli.h"
#include "sched/sched.h"

#define CMD "fit"
#define LINE_MAX_FIT 4096

static const char fit_usage[] =
	"usage: kvconductor fit FILE.csv [--output FILE] [--config BASE]\n"
	"         [--reject MODE]\n"
	"\n"
	"Fit seconds = quad*(n^2 - c^2) + lin*(n - c) + const by least\n"
	"squares (every coefficient >= 0) to rows \"tokens,cached,seconds\"\n"
	"(n prompt tokens, c of them cached, measured prefill seconds) and\n"
	"write a config file with the result.  A first line that is not\n"
	"numbers is a header; '#' lines and blank lines are skipped.\n"
	"\n"
	"  -o, --output FILE  write the config there (default: standard "
	"output)\n"
	"  -f, --config BASE  take the other keys from BASE (default: "
	"defaults)\n"
	"  -r, --reject MODE  early rejection in the config: off, early,\n"
	"                     predict (default: BASE's, else early, as "
	"serve)\n";

void kvc_fit_usage(FILE *f)
{
	fputs(fit_usage, f);
}

static const struct option fit_opts[] = {
	{ "output", required_argument, NULL, 'o' },
	{ "config", required_argument, NULL, 'f' },
	{ "reject", required_argument, NULL, 'r' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

struct rows {
	struct sched_fit_row *v;
	size_t n, cap;
};

static int rows_push(struct rows *r, const struct sched_fit_row *row)
{
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 256;
		struct sched_fit_row *v = realloc(r->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		r->v = v;
		r->cap = cap;
	}
	r->v[r->n++] = *row;
	return 0;
}

/* bad input, not bad usage: exit 2, but the message names the file and
 * line, and pointing at --help would not help */
static int bad_input(const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cli_fail(CMD, 0, "%s", msg);
	return CLI_EXIT_USAGE;
}

/* one number field ending at ',' or the end; advances *p */
static bool field(char **p, double *v, bool last)
{
	char *end;

	errno = 0;
	*v = strtod(*p, &end);
	if (end == *p || errno || !isfinite(*v))
		return false;
	while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')
		end++;
	if (last ? *end != 0 : *end != ',')
		return false;
	*p = end + !last;
	return true;
}

static bool parse_row(char *line, struct sched_fit_row *row)
{
	return field(&line, &row->n, false) &&
	       field(&line, &row->cached, false) &&
	       field(&line, &row->seconds, true);
}

static bool blank(const char *s)
{
	s += strspn(s, " \t\r\n");
	return *s == 0 || *s == '#';
}

/* one line of the CSV; 0, or CLI_EXIT_USAGE / CLI_EXIT_FAIL with one line
 * printed.  *first: no line but blank ones before this one */
static int read_line(const char *path, unsigned lineno, char *line, bool *first,
		     struct rows *r)
{
	struct sched_fit_row row;
	bool was_first = *first;

	if (blank(line))
		return 0;
	*first = false;
	if (!parse_row(line, &row)) {
		if (was_first)
			return 0; /* a header */
		return bad_input("%s:%u: not \"tokens,cached,"
				 "seconds\"",
				 path, lineno);
	}
	if (row.cached > row.n || row.n < 0 || row.cached < 0 ||
	    row.seconds < 0)
		return bad_input("%s:%u: need 0 <= cached <= "
				 "tokens and seconds >= 0",
				 path, lineno);
	if (rows_push(r, &row) < 0) {
		cli_fail(CMD, -ENOMEM, "rows");
		return CLI_EXIT_FAIL;
	}
	return 0;
}

/* 0, or CLI_EXIT_USAGE / CLI_EXIT_FAIL with one line printed */
static int read_rows(const char *path, struct rows *r)
{
	char line[LINE_MAX_FIT];
	unsigned lineno = 0;
	bool first = true;
	FILE *f = strcmp(path, "-") ? fopen(path, "re") : stdin;
	int rc = 0;

	if (!f) {
		cli_fail(CMD, -errno, "%s", path);
		return CLI_EXIT_FAIL;
	}
	while (rc == 0 && fgets(line, sizeof(line), f)) {
		lineno++;
		if (!strchr(line, '\n') && !feof(f))
			rc = bad_input("%s:%u: line too long", path, lineno);
		else
			rc = read_line(path, lineno, line, &first, r);
	}
	if (rc == 0 && ferror(f)) {
		cli_fail(CMD, -EIO, "%s", path);
		rc = CLI_EXIT_FAIL;
	}
	if (f != stdin)
		fclose(f);
	return rc;
}

static int write_config(const char *out, const struct sched_config *c,
			const char *header)
{
	FILE *f = out ? fopen(out, "we") : stdout;
	int rc;

	if (!f) {
		cli_fail(CMD, -errno, "%s", out);
		return CLI_EXIT_FAIL;
	}
	rc = sched_config_write(c, header, f);
	if (out && fclose(f) && rc == 0)
		rc = -EIO;
	if (rc < 0) {
		cli_fail(CMD, rc, "writing %s", out ? out : "standard output");
		return CLI_EXIT_FAIL;
	}
	return CLI_EXIT_OK;
}

static int fit(const char *csv, const char *out, struct sched_config *c)
{
	struct rows r = { 0 };
	char header[512];
	double rmse;
	int rc;

	rc = read_rows(csv, &r);
	if (rc)
		goto out_free;
	if (sched_cost_fit(r.v, r.n, &c->cost, &rmse) < 0) {
		rc = bad_input("%s: %zu rows fix no prefill "
			       "coefficient (need 2 or more, some with "
			       "tokens > cached)",
			       csv, r.n);
		goto out_free;
	}
	snprintf(header, sizeof(header),
		 "kvconductor config, written by kvconductor fit\n"
		 "prefill model fitted to %zu rows of %s: rmse %.6g s\n"
		 "prefill s = quad*(n^2 - c^2) + lin*(n - c) + const",
		 r.n, csv, rmse);
	rc = write_config(out, c, header);
	if (rc == 0 && out)
		printf("fit: %zu rows, prefill_quad %.6g, prefill_lin %.6g, "
		       "prefill_const %.6g, rmse %.6g s -> %s\n",
		       r.n, c->cost.pf_quad, c->cost.pf_lin, c->cost.pf_const,
		       rmse, out);
out_free:
	free(r.v);
	return rc;
}

int kvc_fit_main(int argc, char **argv)
{
	const char *out = NULL, *base = NULL, *reject = NULL;
	struct sched_config cfg;
	char err[512];
	int c, rc;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":o:f:r:h", fit_opts, NULL)) !=
	       -1) {
		switch (c) {
		case 'h':
			kvc_fit_usage(stdout);
			return CLI_EXIT_OK;
		case 'o':
			out = optarg;
			break;
		case 'f':
			base = optarg;
			break;
		case 'r':
			reject = optarg;
			break;
		default:
			return cli_bad_option(CMD, c, argv);
		}
	}
	if (optind != argc - 1)
		return cli_usage_error(CMD, "give one FILE.csv");
	sched_config_default(&cfg);
	/*
	 * The fitted config is meant for `serve --config`, and a key it
	 * writes wins over the daemon's defaults: writing the library's
	 * default (off) here would silently turn the daemon's early
	 * rejection off.  So the daemon's default goes in, unless BASE or
	 * --reject says otherwise.
	 */
	cfg.reject = SCHED_REJECT_EARLY;
	if (reject && sched_reject_parse(reject, &cfg.reject) < 0)
		return cli_usage_error(CMD,
				       "--reject: '%s' is not off, early "
				       "or predict",
				       reject);
	if (base) {
		rc = sched_config_load(&cfg, base, err, sizeof(err));
		if (rc < 0) {
			cli_fail(CMD, 0, "%s", err);
			return rc == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
		}
		/* --reject overrides BASE too */
		if (reject)
			sched_reject_parse(reject, &cfg.reject);
	}
	return fit(argv[optind], out, &cfg);
}
