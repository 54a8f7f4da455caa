/*
 * fakepyxis: a SPANK plugin that stands in for NVIDIA's pyxis on the test Slurm.
 *
 * Gym's `gym eval submit` writes job scripts whose srun steps carry pyxis's container flags
 * (--container-image, --container-mounts, --container-workdir, --no-container-mount-home).
 * A Slurm without pyxis rejects them ("unrecognized option"). This plugin registers those
 * option names (and pyxis's other common ones) so the real srun accepts them, and ignores
 * them: every step runs directly on the node, in the job's own environment.
 *
 * With the plugstack argument `log=PATH`, each step appends one line saying what it was asked
 * for, so a recording can show the flags reached Slurm:
 *   job=17 step=0 image=vllm/vllm-openai:latest mounts= workdir= no_container_mount_home=1
 *
 * Built by .ci/install_slurm.sh:  gcc -shared -fPIC -o fakepyxis.so fakepyxis.c
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <slurm/spank.h>

SPANK_PLUGIN(fakepyxis, 1);

enum { OPT_IMAGE = 1, OPT_MOUNTS, OPT_WORKDIR, OPT_NO_MOUNT_HOME, OPT_OTHER };

static char image[4096];
static char mounts[16384];
static char workdir[4096];
static int no_mount_home;
static char log_path[4096];

static void keep(char *dst, size_t size, const char *value)
{
    snprintf(dst, size, "%s", value ? value : "");
}

static int take_option(int val, const char *optarg, int remote)
{
    (void)remote;
    switch (val) {
    case OPT_IMAGE: keep(image, sizeof(image), optarg); break;
    case OPT_MOUNTS: keep(mounts, sizeof(mounts), optarg); break;
    case OPT_WORKDIR: keep(workdir, sizeof(workdir), optarg); break;
    case OPT_NO_MOUNT_HOME: no_mount_home = 1; break;
    default: break;   /* accepted and ignored */
    }
    return ESPANK_SUCCESS;
}

struct spank_option spank_options[] = {
    {"container-image", "[USER@][REGISTRY#]IMAGE[:TAG]|PATH", "ignored (fakepyxis)", 1, OPT_IMAGE, take_option},
    {"container-mounts", "SRC:DST[:FLAGS][,...]", "ignored (fakepyxis)", 1, OPT_MOUNTS, take_option},
    {"container-workdir", "PATH", "ignored (fakepyxis)", 1, OPT_WORKDIR, take_option},
    {"no-container-mount-home", NULL, "ignored (fakepyxis)", 0, OPT_NO_MOUNT_HOME, take_option},
    {"container-mount-home", NULL, "ignored (fakepyxis)", 0, OPT_OTHER, take_option},
    {"container-name", "NAME", "ignored (fakepyxis)", 1, OPT_OTHER, take_option},
    {"container-save", "PATH", "ignored (fakepyxis)", 1, OPT_OTHER, take_option},
    {"container-env", "NAME[,NAME...]", "ignored (fakepyxis)", 1, OPT_OTHER, take_option},
    {"container-remap-root", NULL, "ignored (fakepyxis)", 0, OPT_OTHER, take_option},
    {"no-container-remap-root", NULL, "ignored (fakepyxis)", 0, OPT_OTHER, take_option},
    {"container-entrypoint", NULL, "ignored (fakepyxis)", 0, OPT_OTHER, take_option},
    {"no-container-entrypoint", NULL, "ignored (fakepyxis)", 0, OPT_OTHER, take_option},
    {"container-writable", NULL, "ignored (fakepyxis)", 0, OPT_OTHER, take_option},
    {"container-readonly", NULL, "ignored (fakepyxis)", 0, OPT_OTHER, take_option},
    SPANK_OPTIONS_TABLE_END
};

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    (void)sp;
    for (int i = 0; i < ac; i++) {
        if (strncmp(av[i], "log=", 4) == 0)
            keep(log_path, sizeof(log_path), av[i] + 4);
    }
    return ESPANK_SUCCESS;
}

/* Remote context (slurmstepd), once per step on the node: the options are known by now. */
int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
    uint32_t job = 0, step = 0;
    FILE *fh;

    (void)ac;
    (void)av;
    if (!log_path[0])
        return ESPANK_SUCCESS;
    spank_get_item(sp, S_JOB_ID, &job);
    spank_get_item(sp, S_JOB_STEPID, &step);
    fh = fopen(log_path, "a");
    if (!fh)
        return ESPANK_SUCCESS;   /* a log is a courtesy: never fail a step for it */
    fprintf(fh, "job=%u step=%u image=%s mounts=%s workdir=%s no_container_mount_home=%d\n",
            job, step, image, mounts, workdir, no_mount_home);
    fclose(fh);
    return ESPANK_SUCCESS;
}
