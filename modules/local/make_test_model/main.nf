/*
 * Builds a tiny seeded Predmoter-layout checkpoint for -profile test: the real model code runs end to end,
 * the numbers it predicts are meaningless.
 */
process MAKE_TEST_MODEL {
    tag "seed ${seed}"
    label 'process_single'

    input:
    val seed

    output:
    path("chromaflow_tiny_seed${seed}.ckpt", emit: ckpt)
    path("versions.yml"                    , emit: versions)

    when:
    task.ext.when == null || task.ext.when

    script:
    def args = task.ext.args ?: ''
    """
    chromaflow make-test-model --out chromaflow_tiny_seed${seed}.ckpt --seed ${seed} --force ${args}

    chromaflow versions "${task.process}" torch >| versions.yml
    """

    stub:
    """
    touch chromaflow_tiny_seed${seed}.ckpt
    printf '"%s":\\n    chromaflow: stub\\n' "${task.process}" >| versions.yml
    """
}
