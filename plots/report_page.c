/*
 * report_page.c: the report's HTML page and its Markdown twin written side
 * by side (report_int.h): escaping, headings with anchors, paragraphs,
 * tables, figures (inlined as base64 PNG data in the HTML, linked as files
 * from the Markdown).
 */
#include <stdio.h>
#include <string.h>

#include "report_int.h"

void html_esc(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		default: fputc(*s, f);
		}
	}
}

void md_esc(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '|' || *s == '*' || *s == '_' || *s == '`' || *s == '\\' || *s == '[' ||
		    *s == ']')
			fputc('\\', f);
		fputc(*s == '\n' ? ' ' : *s, f);
	}
}

void page_heading(struct page *p, int level, const char *id, const char *text)
{
	fprintf(p->html, "<h%d", level);
	if (id) {
		fputs(" id=\"", p->html);
		html_esc(p->html, id);
		fputc('"', p->html);
	}
	fputc('>', p->html);
	html_esc(p->html, text);
	fprintf(p->html, "</h%d>\n", level);
	fprintf(p->md, "\n%s ", level <= 2 ? "##" : "###");
	md_esc(p->md, text);
	fputs("\n\n", p->md);
}

void page_para(struct page *p, const char *text)
{
	fputs("<p>", p->html);
	html_esc(p->html, text);
	fputs("</p>\n", p->html);
	md_esc(p->md, text);
	fputs("\n\n", p->md);
}

void page_para_link(struct page *p, const char *text, const char *href, const char *link,
		    const char *after)
{
	fputs("<p>", p->html);
	html_esc(p->html, text);
	fputs("<a href=\"", p->html);
	html_esc(p->html, href);
	fputs("\">", p->html);
	html_esc(p->html, link);
	fputs("</a>", p->html);
	html_esc(p->html, after);
	fputs("</p>\n", p->html);
	md_esc(p->md, text);
	fputc('[', p->md);
	md_esc(p->md, link);
	fprintf(p->md, "](%s)", href);
	md_esc(p->md, after);
	fputs("\n\n", p->md);
}

void tab_begin(struct page *p, int ncols, const char *const *heads)
{
	p->ncols = ncols;
	fputs("<table>\n<tr>", p->html);
	fputs("|", p->md);
	for (int i = 0; i < ncols; i++) {
		fputs("<th>", p->html);
		html_esc(p->html, heads[i]);
		fputs("</th>", p->html);
		fputc(' ', p->md);
		md_esc(p->md, heads[i]);
		fputs(" |", p->md);
	}
	fputs("</tr>\n", p->html);
	fputs("\n|", p->md);
	for (int i = 0; i < ncols; i++)
		fputs("---|", p->md);
	fputc('\n', p->md);
}

void tab_row_link(struct page *p, const char *const *cells, const char *href)
{
	fputs("<tr>", p->html);
	fputs("|", p->md);
	for (int i = 0; i < p->ncols; i++) {
		const char *c = cells[i] ? cells[i] : "";
		fputs("<td>", p->html);
		if (i == 0 && href) {
			fputs("<a href=\"", p->html);
			html_esc(p->html, href);
			fputs("\">", p->html);
		}
		html_esc(p->html, c);
		if (i == 0 && href)
			fputs("</a>", p->html);
		fputs("</td>", p->html);
		fputc(' ', p->md);
		md_esc(p->md, c);
		fputs(" |", p->md);
	}
	fputs("</tr>\n", p->html);
	fputc('\n', p->md);
}

void tab_row(struct page *p, const char *const *cells)
{
	tab_row_link(p, cells, NULL);
}

void tab_end(struct page *p)
{
	fputs("</table>\n", p->html);
	fputc('\n', p->md);
}

static int base64_file(FILE *out, const char *path)
{
	static const char tbl[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	FILE *in = fopen(path, "rb");
	unsigned char b[3];
	size_t n;
	if (!in)
		return -1;
	while ((n = fread(b, 1, 3, in)) > 0) {
		unsigned v = (unsigned)b[0] << 16 | (n > 1 ? (unsigned)b[1] << 8 : 0) |
			     (n > 2 ? b[2] : 0);
		fputc(tbl[v >> 18 & 63], out);
		fputc(tbl[v >> 12 & 63], out);
		fputc(n > 1 ? tbl[v >> 6 & 63] : '=', out);
		fputc(n > 2 ? tbl[v & 63] : '=', out);
	}
	int bad = ferror(in);
	fclose(in);
	return bad ? -1 : 0;
}

int page_figure(struct page *p, const char *png_path, const char *name, const char *caption)
{
	fputs("<figure><img alt=\"", p->html);
	html_esc(p->html, caption);
	fputs("\" src=\"data:image/png;base64,", p->html);
	if (base64_file(p->html, png_path) < 0)
		return -1;
	fputs("\"><figcaption>", p->html);
	html_esc(p->html, caption);
	fputs("</figcaption></figure>\n", p->html);
	fputs("![", p->md);
	md_esc(p->md, caption);
	fprintf(p->md, "](%s)\n\n", name);
	return 0;
}
