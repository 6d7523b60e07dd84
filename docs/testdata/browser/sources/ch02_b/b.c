/* b.c: new in ch02_b. */
int b(void)
{
    return 2;
}
