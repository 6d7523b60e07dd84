#include <stdio.h>
#include "coro.h"

static void *hello(void *arg)
{
    puts(arg);
    return NULL;
}

int main(void)
{
    return hello("hello") != NULL;
}
