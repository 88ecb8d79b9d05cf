#ifndef WC_H
#define WC_H
unsigned wc_words(const char *text);
#endif
