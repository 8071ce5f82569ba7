"""The `deepgreen` program (and `python -m deepgreen_audit`): Ctrl-C exits 130 from the start
(`program.quiet_interrupt`, before anything heavy is imported)."""

from deepgreen_audit.program import exit_with, quiet_interrupt

quiet_interrupt()


def main() -> None:
    from deepgreen_audit.cli import main as run

    exit_with(run(owns_process=True))


if __name__ == "__main__":
    main()
