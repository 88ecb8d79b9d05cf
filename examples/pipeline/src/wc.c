#include "wc.h"

/* Counts the words of text: runs of characters other than space, tab and newline. */
unsigned wc_words(const char *text) {
  unsigned words = 0;
  int inside = 0;
  for (; *text != '\0'; text++) {
    int blank = *text == ' ' || *text == '\t' || *text == '\n';
    if (!blank && !inside) words++;
    inside = !blank;
  }
  return words;
}
