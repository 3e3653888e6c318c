/* embed.c - build-time helper: turns a text file into a C string constant, so
 * the device runtime header travels inside the library.
 * Usage: embed SYMBOL FILE > out.c */
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: embed SYMBOL FILE\n");
        return 2;
    }
    FILE *f = fopen(argv[2], "rb");
    if (!f) {
        perror(argv[2]);
        return 1;
    }
    printf("/* generated from %s by tools/embed.c; do not edit */\n", argv[2]);
    printf("#include <stddef.h>\nconst char %s[] = {\n", argv[1]);
    int c;
    size_t n = 0;
    while ((c = fgetc(f)) != EOF) {
        printf("%d,", c);
        if (++n % 24 == 0)
            putchar('\n');
    }
    printf("0};\nconst size_t %s_len = %zu;\n", argv[1], n);
    fclose(f);
    return 0;
}
