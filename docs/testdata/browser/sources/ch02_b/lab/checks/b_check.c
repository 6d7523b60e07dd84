/* b_check.c: a made-up exercise check, new in ch02_b's lab/. The diff page
 * must not list it: lab/ is not the chapter's code. */
int b_check(void)
{
    return 0;
}
