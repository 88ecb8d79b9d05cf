#include <stdio.h>
#include <stdlib.h>
#include "../src/wc.h"

static int failures = 0;

static void expect(const char *text, unsigned words) {
  unsigned got = wc_words(text);
  if (got != words) {
    fprintf(stderr, "error: wc_words(\"%s\") = %u, expected %u\n", text, got, words);
    failures++;
  }
}

int main(void) {
  expect("", 0);
  expect("one", 1);
  expect("  two\twords\n", 2);
  /* WC_SAMPLE comes from the step's env: the plan's own input. */
  const char *sample = getenv("WC_SAMPLE");
  if (sample != NULL) printf("sample has %u words\n", wc_words(sample));
  printf("%s\n", failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}
